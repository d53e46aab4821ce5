"""The ci-logs label format (``../shared/data/ci-logs``: real CI failure logs other people's
builds wrote), read onto this project's own ``CaseLabel`` so the same evaluation path
measures them.

A ci-logs label says what the failure IS (``failure_class``, ``root_cause`` lines copied
verbatim from the log, the first the primary one; ``family``, ``tool``, ``ci_system``, an
optional ``kind`` for a code failure). What a good decision about it looks like is derived
here, in one place:

* the log is a failing check's log (check ``ci``, exit 1, not timed out by our runner);
* a model call is warranted for a code failure only;
* the acceptable actions come from ``ACCEPTABLE_ACTIONS`` below.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, ValidationError

from orchestrator.domain.validation import Frozen, describe_validation_error
from orchestrator.eval.label import CaseLabel

CHECK_NAME: Final = "ci"
CHECK_EXIT_CODE: Final = 1

FailureClass = Literal[
    "code", "network", "timeout", "resource_exhausted", "auth_error", "config_error",
    "outage", "rate_limited",
]  # fmt: skip
CodeKind = Literal["mechanical", "dependency"]

# What a good decision about each labelled class is. A code failure is the model's to
# decide: it may re-run the coding stage with its diagnosis, climb the model ladder,
# switch engines or split the ticket. A mechanical failure (a formatter, a linter's fixable
# rule) may also be fixed by a recipe; a dependency failure (a package or lock file) may be
# fixed by a recipe too, or need a person (a dependency nobody has published). A non-code
# class gets exactly what ``recovery.diagnose.infra_decision`` answers on a fresh ticket:
# a back-off retry where waiting can help, a person where it cannot (config, auth,
# memory). tests/eval/test_ci_logs_labels.py holds this table to ``infra_decision``.
CODE_FIX: Final = ("retry", "escalate-model", "switch-engine", "split")
ACCEPTABLE_ACTIONS: Final[dict[str, tuple[str, ...]]] = {
    "code": CODE_FIX,
    "code/mechanical": (*CODE_FIX, "mechanical-fix"),
    "code/dependency": (*CODE_FIX, "mechanical-fix", "abandon-human"),
    "network": ("retry",),
    "timeout": ("retry",),
    "outage": ("retry",),
    "rate_limited": ("retry",),
    "config_error": ("abandon-human",),
    "auth_error": ("abandon-human",),
    "resource_exhausted": ("abandon-human",),
}


class CiLogLabel(Frozen):
    """One ``label.json`` of the ci-logs corpus, as its README describes it."""

    source_url: str
    origin: str
    ci_system: str
    project: str
    tool: Annotated[str, Field(min_length=1)]
    family: Annotated[str, Field(min_length=1)]
    failure_class: FailureClass
    root_cause: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]
    notes: str = ""
    kind: CodeKind | None = None
    ci_job: str | None = None

    @property
    def acceptable_actions(self) -> tuple[str, ...]:
        if self.failure_class == "code" and self.kind is not None:
            return ACCEPTABLE_ACTIONS[f"code/{self.kind}"]
        return ACCEPTABLE_ACTIONS[self.failure_class]


def is_ci_logs_label(raw: object) -> bool:
    """A label in the ci-logs format: it names a CI system or lists its root causes (this
    project's own labels do neither)."""
    return isinstance(raw, dict) and ("ci_system" in raw or isinstance(raw.get("root_cause"), list))


def case_label(raw: Any, case_id: str) -> CaseLabel:
    """The ``CaseLabel`` the evaluation reads for a ci-logs label. Raises ValueError with
    one ``key: problem`` line per bad key."""
    try:
        label = CiLogLabel.model_validate(raw)
    except ValidationError as exc:
        raise ValueError("; ".join(describe_validation_error(exc))) from exc
    if label.kind is not None and label.failure_class != "code":
        raise ValueError(f"kind: {label.kind!r} applies to a code failure only")
    first, *more = label.root_cause
    return CaseLabel(
        id=case_id,
        description=label.notes.split(". ")[0][:200] or label.tool,
        tool=label.tool,
        source="check",
        check=CHECK_NAME,
        exit_code=CHECK_EXIT_CODE,
        timed_out=False,
        failure_class=label.failure_class,
        model_call_warranted=label.failure_class == "code",
        acceptable_actions=label.acceptable_actions,
        root_cause=first,
        root_cause_also=tuple(more),
        family=label.family,
        notes=label.notes,
    )
