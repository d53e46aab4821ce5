"""Answering the decision a paused run waits on: the one code path behind
``orchestrator approve`` / ``reject`` and an approval given in an issue comment
(``comment_approvals.py``). The answer is bound to the verdict file as it is now, byte
for byte, and signed; carrying it out is the run's next drive (``run_ticket``)."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord, pending_verdict
from orchestrator.storage import Approval, VerdictRecord


@dataclass(frozen=True)
class Answered:
    approval: Approval
    decided: VerdictRecord
    record: RunRecord  # the run as it was answered, still awaiting its next drive


def answer_decision(
    services: Services,
    run_id: str,
    *,
    approved: bool,
    reason: str | None,
    by: str,
    comment_url: str | None = None,
) -> Answered:
    """Write the signed answer to the decision ``run_id`` waits on. The caller holds the
    ticket's lock. UsageError when the run waits on nothing, or its verdict file changed
    since the decision was taken (then nothing is written)."""
    record = services.storage.runs.load(run_id)
    ref = pending_verdict(record)
    if record.state is not RunState.AWAITING_APPROVAL or ref is None:
        raise UsageError(f"run {run_id} is {record.state}, not awaiting approval")
    decided, digest = services.storage.decisions.read_with_sha256(run_id, ref.number)
    changed = ref.changed(digest)
    if changed is not None:  # what a person would approve is not what was decided
        raise UsageError(f"{ref.path}: {changed}; nothing was answered")
    approval = bound_answer(
        services, run_id, decided, digest,
        approved=approved, by=by, reason=reason, comment_url=comment_url,
    )  # fmt: skip
    return Answered(approval, decided, record)


def bound_answer(
    services: Services, run_id: str, decided: VerdictRecord, digest: str, *, approved: bool,
    by: str, reason: str | None = None, comment_url: str | None = None,
) -> Approval:  # fmt: skip
    """The signed answer to ``decided`` (a person's, or recover's automatic one), bound to
    its file's bytes as they were read (``digest``)."""
    proposal = decided.proposal
    answer = Approval(
        decision_id=proposal.decision_id, run_id=run_id, verdict=decided.number,
        approved=approved, by=by, at=services.clock(), routing=proposal.routing,
        reason=reason, comment_url=comment_url,
    )  # fmt: skip
    return approvals_of(services).write(answer, verdict_sha256=digest)
