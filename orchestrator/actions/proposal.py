"""The one place the actions read a Proposal: its verdict and the evidence they act on.

A proposal carries its verdict and evidence as data; every action reads them through
these accessors, so a change to the proposal's shape changes this module only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.domain.errors import StateError
from orchestrator.recovery.verdict import Verdict, validate_verdict_object

if TYPE_CHECKING:
    from orchestrator.recovery.graph import Proposal


def checked_verdict_of(proposal: Proposal) -> tuple[Verdict | None, list[str]]:
    """The proposal's verdict, or None and why it is not one (for plans, which state a
    refusal rather than raise)."""
    return validate_verdict_object(proposal.action)


def verdict_of(proposal: Proposal) -> Verdict:
    """The proposal's verdict, typed. A proposal that does not hold one is a state error:
    it was validated before it was persisted, so this is damage, not a model's mistake."""
    verdict, errors = checked_verdict_of(proposal)
    if verdict is None:
        raise StateError(f"state error: proposal {proposal.decision_id} is not a verdict: {errors}")
    return verdict


def action_name_of(proposal: Proposal) -> str:
    """The action the proposal names, even when it is not a valid verdict."""
    return str(proposal.action.get("action"))


@dataclass(frozen=True)
class FailureFacts:
    """What failed, as the decision recorded it (never as the model described it)."""

    stage: str
    check: str | None
    infra: str | None  # the infrastructure failure class, when that is what it was


@dataclass(frozen=True)
class HaltFacts:
    reason: str | None  # the halt a terminal verdict names (None: a plain abandon)
    cap_exhausted: bool


def failure_of(proposal: Proposal) -> FailureFacts:
    failure = proposal.evidence_of("failure")
    check, infra = failure.get("check"), failure.get("infra")
    return FailureFacts(
        stage=str(failure.get("stage")),
        check=str(check) if check is not None else None,
        infra=str(infra) if infra else None,
    )


def halt_of(proposal: Proposal) -> HaltFacts:
    halt = proposal.evidence_of("halt")
    reason = halt.get("reason")
    return HaltFacts(
        reason=str(reason) if reason else None, cap_exhausted=bool(halt.get("cap_exhausted"))
    )


def source_of(proposal: Proposal) -> str:
    return str(proposal.evidence_of("source").get("source", "?"))


def bundle_path_of(proposal: Proposal) -> str | None:
    path = proposal.evidence_of("bundle").get("path")
    return str(path) if path else None


def reason_of(proposal: Proposal) -> str:
    return proposal.reasoning[0] if proposal.reasoning else ""
