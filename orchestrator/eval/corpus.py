"""The labelled failure corpus on disk: a directory of cases, each a directory holding
``log.txt`` (the failed stage's or check's log, exactly as the runner wrote it) and
``label.json`` (what a good decision about it looks like).

Labels are validated when read: a typo in a class or an action names the case and the
key, and nothing else is read past it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from orchestrator.actions.registry import REGISTRY
from orchestrator.domain.errors import UsageError
from orchestrator.domain.validation import Frozen, describe_validation_error

LABEL_FILE = "label.json"
LOG_FILE = "log.txt"

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


class CorpusError(UsageError):
    """The corpus cannot be read as given (missing directory, a bad label)."""


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
    padded: bool = False
    notes: str = ""

    @model_validator(mode="after")
    def _known_names(self) -> CaseLabel:
        problems = []
        if self.failure_class not in KNOWN_CLASSES:
            problems.append(f"failure_class: unknown class {self.failure_class!r}")
        unknown = [a for a in self.acceptable_actions if a not in REGISTRY]
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


@dataclass(frozen=True)
class Case:
    label: CaseLabel
    log_path: Path


def write_case(corpus_dir: Path, label: CaseLabel, log: bytes) -> Path:
    """Write one case (its directory, log and label); returns its directory."""
    where = corpus_dir / label.id
    where.mkdir(parents=True, exist_ok=True)
    (where / LOG_FILE).write_bytes(log)
    text = json.dumps(label.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    (where / LABEL_FILE).write_text(text)
    return where


def _read_label(path: Path) -> CaseLabel:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: cannot read the label ({exc})") from exc
    try:
        label = CaseLabel.model_validate(raw)
    except ValidationError as exc:
        raise CorpusError(f"{path}: " + "; ".join(describe_validation_error(exc))) from exc
    if label.id != path.parent.name:
        raise CorpusError(f"{path}: id {label.id!r} is not its directory's name")
    return label


def load_corpus(corpus_dir: Path) -> tuple[Case, ...]:
    """Every case under ``corpus_dir``, sorted by id. Raises CorpusError for a missing
    directory, an empty corpus, a bad label or a case without its log."""
    if not corpus_dir.is_dir():
        raise CorpusError(f"no corpus at {corpus_dir} (build one: bash scripts/dev.sh corpus DIR)")
    cases = []
    for label_path in sorted(corpus_dir.glob(f"*/{LABEL_FILE}")):
        label = _read_label(label_path)
        log = label_path.parent / LOG_FILE
        if not log.is_file():
            raise CorpusError(f"{label_path.parent}: case {label.id!r} has no {LOG_FILE}")
        cases.append(Case(label, log))
    if not cases:
        raise CorpusError(f"{corpus_dir}: no cases (no */{LABEL_FILE})")
    return tuple(cases)
