"""abandon-human: the ticket stops and a person gets it, with a hand-off file saying
what failed, what was tried and where the evidence is. Also how every other way of
stopping ends (a rejected proposal, a spent retry budget): one hand-off for all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, PlanFacts
from orchestrator.actions.proposal import action_name_of
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Halt, RunRecord
from orchestrator.domain.verdicts import AbandonHumanVerdict
from orchestrator.execution.reporter import HandoffFacts

if TYPE_CHECKING:
    from orchestrator.execution.attempts import StageServices


# Not a judgement a person must make about the code: a misconfigured machine fails the
# ticket; an outage that outlasted the back-off is not an end (the next batch goes on).
_ENDS_BY_HALT = {
    HaltReason.CONFIG_ERROR.value: RunState.FAILED,
    HaltReason.INFRA_UNAVAILABLE.value: RunState.WAITING_INFRA,
}


def plan(verdict: AbandonHumanVerdict, facts: PlanFacts) -> Dispatch:
    """A spent cap or a configuration error ends the ticket ``failed``; an outage that
    outlasted the back-off waits (``waiting-infra``); anything else ``needs-human`` with
    the halt the decision recorded (a plain abandon: ``abandoned``)."""
    if facts.cap_exhausted:
        halt, ends = HaltReason.CAP_EXHAUSTED.value, RunState.FAILED
    else:
        halt = facts.halt_reason or HaltReason.ABANDONED.value
        ends = _ENDS_BY_HALT.get(halt, RunState.NEEDS_HUMAN)
    return Dispatch(verdict.action, facts.approval, terminal=ends.value, halt=halt)


def apply(
    record: RunRecord, applying: DecisionToApply, plan: Dispatch, services: StageServices
) -> tuple[RunRecord, Effect]:
    assert plan.terminal is not None and plan.halt is not None  # as ``plan`` makes it
    return stop(record, applying, services, RunState(plan.terminal), HaltReason(plan.halt))


def stop(
    record: RunRecord, applying: DecisionToApply, services: StageServices, state: RunState,
    reason: HaltReason, *, why: str | None = None,
) -> tuple[RunRecord, Effect]:  # fmt: skip
    """End the run in ``state`` for ``reason``, with a hand-off written first."""
    store = services.storage.runs
    # A synthetic or replaced verdict's summary is the reason; a real one's is its words.
    detail = why or f"{applying.source} verdict {applying.number}: {applying.verdict.summary}"
    facts = HandoffFacts(
        why=detail,
        verdict_number=applying.number,
        source=applying.source,
        action=action_name_of(applying.proposal),
        reason=applying.reason,
        record_path=store.record_path(record.run_id),
        verdict_path=store.verdict_path(record.run_id, applying.number),
        bundle_path=applying.bundle_path,
        halt=reason.value,
    )
    handoff = store.write_handoff(record.run_id, services.handoffs.stopped(record, facts))
    record = record.model_copy(update={"handoff": str(handoff)})
    halt = Halt(
        reason=reason, stage=applying.failing_stage.name, detail=f"{detail}; hand-off: {handoff}"
    )
    return record, Effect(outcome=f"{state}: {reason}", terminal=state, halt=halt)


SPEC: ActionSteps[AbandonHumanVerdict] = ActionSteps(name="abandon-human", plan=plan, apply=apply)
