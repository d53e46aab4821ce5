"""The one place the actions read a Proposal: its verdict and the evidence they act on.

Every action reads a proposal through these accessors, so a change to the proposal's
shape changes this module only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.domain.proposals import FailureEvidence, HaltEvidence, Proposal
    from orchestrator.domain.verdicts import Verdict


def verdict_of(proposal: Proposal) -> Verdict:
    """The proposal's verdict (validated when the proposal was made or read)."""
    return proposal.action


def action_name_of(proposal: Proposal) -> str:
    """The action the proposal names (a rejected one's own, not the abandon it becomes)."""
    return proposal.action.action


def failure_of(proposal: Proposal) -> FailureEvidence:
    """What failed, as the decision recorded it (never as the model described it)."""
    return proposal.evidence.failure


def halt_of(proposal: Proposal) -> HaltEvidence:
    return proposal.evidence.halt


def source_of(proposal: Proposal) -> str:
    return proposal.evidence.source.source.value


def bundle_path_of(proposal: Proposal) -> str | None:
    return proposal.evidence.bundle.path


def reason_of(proposal: Proposal) -> str:
    return proposal.reasoning[0] if proposal.reasoning else ""
