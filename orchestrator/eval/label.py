"""A case's label in this project's own format: what a case is and what a good decision
about it looks like. (``eval.ci_logs`` reads another format onto it.)"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from orchestrator.domain.validation import Frozen
from orchestrator.domain.vocabulary import VOCABULARY

# The classes a label may name: every failure class, including those the classifier may
# not (yet) produce — a label says what the failure IS, not what the code says today.
KNOWN_CLASSES = frozenset(
    {
        "code",
        "rate_limited",
        "quota_exhausted",
        "auth_error",
        "outage",
        "timeout",
        "engine_error",
        "config_error",
        "resource_exhausted",
        "network",
    }
)
CASE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
Source = Literal["check", "stage", "engine"]


class CaseLabel(Frozen):
    """What a case is and what a good decision about it looks like."""

    id: Annotated[str, Field(pattern=CASE_ID.pattern)]
    description: str
    tool: str
    # How the log was made: a check's log, a plain stage's, or a coding engine's.
    source: Source
    check: str | None = None
    engine: str | None = None
    exit_code: int
    timed_out: bool = False
    start_error: str | None = None
    failure_class: str
    model_call_warranted: bool
    acceptable_actions: Annotated[tuple[str, ...], Field(min_length=1)]
    playbook_entry: str | None = None
    # A substring of the log that names the root cause, as a reader sees it (a coloured
    # log without its escape sequences): it must reach the bundle.
    root_cause: Annotated[str, Field(min_length=1)]
    # Further lines of the same cause (the ci-logs format lists them after the primary one).
    root_cause_also: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    # The tool family a report groups by (the ci-logs format names one).
    family: str | None = None
    padded: bool = False
    notes: str = ""

    @model_validator(mode="after")
    def _known_names(self) -> CaseLabel:
        problems = []
        if self.failure_class not in KNOWN_CLASSES:
            problems.append(f"failure_class: unknown class {self.failure_class!r}")
        unknown = [a for a in self.acceptable_actions if a not in VOCABULARY]
        if unknown:
            problems.append(f"acceptable_actions: unknown action(s) {unknown}")
        if self.source == "engine" and self.engine is None:
            problems.append("engine: required when source is 'engine'")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def infra(self) -> bool:
        return self.failure_class != "code"
