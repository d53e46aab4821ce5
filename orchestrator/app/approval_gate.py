"""Whether an approval found for a decision is its answer: verified (signed, bound to the
verdict file's bytes), in turn (a person's only once the run asked; an automatic one only
once the decision was referenced), and matching the decision as it was routed. An
approval that is not the answer stops the run for a person, and nothing it approved runs.
"""

from __future__ import annotations

from orchestrator.app.ledger_link import LedgerLink
from orchestrator.app.services import Services
from orchestrator.app.substrate import Effect
from orchestrator.domain.config import StageConfig
from orchestrator.domain.errors import StateError
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.runs import Halt, RunRecord, VerdictRef
from orchestrator.storage import Approval, CrashPoint, VerdictRecord
from orchestrator.storage.approvals import AUTO, ApprovalRefused, SignedApprovals


def answer_of(approvals: SignedApprovals, run_id: str, number: int, digest: str) -> Approval | str:
    """The verified answer to decision ``number`` (whose file hashes to ``digest``), or
    why there is none."""
    try:
        approval = approvals.read(run_id, number, verdict_sha256=digest)
    except ApprovalRefused as refused:
        return refused.why
    return approval if approval is not None else "it disappeared while it was being read"


def needs_person(routing: str) -> bool:
    """Routed to a person (``hitl_*``): carried out only once a person approves."""
    return routing not in ("auto", "reject")


def out_of_turn(*, person: bool, asked: bool, fresh: bool) -> str | None:
    """Why an approval found for a decision cannot be its answer whatever it says, from
    when it was found; None when it may be (then it must still verify). A person's answer
    exists only once the run asked (``approve`` writes nothing otherwise); an automatic
    one only once the decision was referenced (a crash after writing it), never beside a
    decision this call has only just taken."""
    if person and not asked:
        return (
            "it was there before the decision was put to a person: no one was asked, "
            "so no one answered"
        )
    if fresh:
        return "it was there before the decision it answers was taken"
    return None


def mismatch(approval: Approval, proposal: Proposal) -> str | None:
    """Why a verified approval still does not answer ``proposal`` as it was routed."""
    if approval.decision_id != proposal.decision_id:
        return f"it answers decision {approval.decision_id}, not {proposal.decision_id}"
    if approval.routing != proposal.routing:
        return f"it was given for routing {approval.routing}, the decision was routed {proposal.routing}"
    if (approval.by == AUTO) == needs_person(proposal.routing):
        who = "a person must answer it" if approval.by == AUTO else "no one was asked"
        return f"an approval by {approval.by} for a decision routed {proposal.routing}: {who}"
    return None


def refused(
    record: RunRecord,
    stage: StageConfig,
    ref: VerdictRef,
    decided: VerdictRecord,
    why: str,
    services: Services,
) -> tuple[RunRecord, Effect]:
    """The approval found is not the decision's answer: nothing it approved runs, and the
    run stops for a person, saying why."""
    halt = Halt(
        reason=HaltReason.APPROVAL_FORGED,
        stage=stage.name,
        detail=(
            f"the approval of verdict {ref.number} was refused and nothing it approved was "
            f"carried out: {why}; see {ref.path}"
        ),
    )
    services.reporter.note(f"approval refused: {why}")
    outcome = f"{RunState.NEEDS_HUMAN}: {HaltReason.APPROVAL_FORGED}"
    # A changed verdict file may name another decision: only this one's row is closed.
    own_id = f"{record.run_id}:attempt-{ref.attempt}:verdict-{ref.number}"
    if decided.proposal.decision_id == own_id:
        try:
            link, ts = LedgerLink.for_services(services), services.clock().isoformat()
            link.outcome(decided.proposal, outcome, ts=ts)
        except StateError as exc:  # the halt stands without the row; say why it is missing
            services.reporter.note(f"the refusal's ledger row was not written: {exc}")
    record = record.with_verdict(ref.model_copy(update={"outcome": outcome}))
    record = record.transition(
        RunState.NEEDS_HUMAN, now=services.clock(), halt=halt, stage=stage.name
    )
    services.storage.runs.save(record, CrashPoint.OUTCOME)
    return record, Effect(outcome=outcome, terminal=RunState.NEEDS_HUMAN, halt=halt)
