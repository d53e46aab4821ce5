"""The only mutator: carries out a validated, persisted decision. A plain dispatcher —
it looks the verdict's action up in the registry, states the plan, charges the retry
budget when the action re-runs something, and has the action carry the plan out. No
model, no judgement; what each action does is in ``orchestrator/actions/``.

``apply`` accepts a Proposal and an Approval and nothing else: what to do, and that it
may be done. Which stage failed, which check, which halt reason — all come from the
proposal's evidence and the trusted config, never from anywhere the model could write.
An infrastructure retry's back-off is returned (``Effect.retry_after_s``) for the
caller to wait out: the mutator never sleeps.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.actions import abandon
from orchestrator.actions.budget import charge_retry
from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, code_stage_for
from orchestrator.actions.proposal import (
    bundle_path_of,
    failure_of,
    reason_of,
    source_of,
    verdict_of,
)
from orchestrator.actions.registry import REGISTRY, plan_dispatch, plan_for
from orchestrator.app.services import Services
from orchestrator.domain.config import Config
from orchestrator.domain.errors import StateError
from orchestrator.domain.infra_wait import infra_window_start
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.verdicts import AbandonHumanVerdict
from orchestrator.domain.verdicts import abandon as abandon_verdict
from orchestrator.domain.vocabulary import VOCABULARY
from orchestrator.storage import Approval

# The plan, its parts and the code-stage rule are the actions'; replay and recover use
# them from here.
__all__ = ["DecisionToApply", "Dispatch", "Effect", "apply", "code_stage_for", "plan_dispatch"]


def _decision_to_apply(proposal: Proposal, approval: Approval, config: Config) -> DecisionToApply:
    if approval.decision_id != proposal.decision_id:
        raise StateError(
            f"state error: approval for {approval.decision_id} does not answer {proposal.decision_id}"
        )
    verdict = verdict_of(proposal)
    if proposal.routing == "reject" and not isinstance(verdict, AbandonHumanVerdict):
        # Defence in depth: a rejected proposal never runs; a person gets the ticket.
        verdict = abandon_verdict(f"proposal rejected: {reason_of(proposal)}")
    return DecisionToApply(
        proposal=proposal,
        approval=approval,
        verdict=verdict,
        failing_stage=config.stage(failure_of(proposal).stage),
        source=source_of(proposal),
        reason=reason_of(proposal),
        bundle_path=bundle_path_of(proposal),
    )


def apply(
    record: RunRecord, proposal: Proposal, approval: Approval, services: Services
) -> tuple[RunRecord, Effect]:
    """Carry out ``proposal``, which ``approval`` approved. Nothing else gets in."""
    config = services.loaded.config
    applying = _decision_to_apply(proposal, approval, config)
    infra_since = infra_window_start(record)
    if record.state is RunState.AWAITING_APPROVAL:  # answered: recovering while carried out
        stage = applying.failing_stage.name
        record = record.transition(RunState.RECOVERING, now=services.clock(), stage=stage)
    if not approval.approved:
        return abandon.stop(
            record, applying, services, RunState.NEEDS_HUMAN, HaltReason.HUMAN_REJECTED,
            why=f"rejected by {approval.by}: {approval.reason or 'no reason given'}",
        )  # fmt: skip
    plan = plan_for(proposal, applying.failing_stage, config, record)
    if plan.error is not None:
        raise StateError(
            f"state error: proposal {proposal.decision_id} cannot be carried out: {plan.error}"
        )
    steps = REGISTRY.get(plan.action)
    if not VOCABULARY.get(plan.action).retry_like:
        return steps.apply(record, applying, plan, services)
    charge = charge_retry(
        services.storage.budgets,
        ticket_id=record.ticket_id,
        run_id=record.run_id,
        verdict_number=applying.number,
        infra=failure_of(proposal).infra is not None,
        recovery=config.recovery,
        at=services.clock(),
        infra_since=infra_since,
    )
    if not charge.granted:
        return abandon.stop(
            record, applying, services, RunState.NEEDS_HUMAN, HaltReason.CAP_EXHAUSTED,
            why=f"{charge.refusal}; the verdict was {applying.verdict.action}",
        )  # fmt: skip
    counters = record.counters.model_copy(update={"retries": record.counters.retries + 1})
    record, effect = steps.apply(
        record.model_copy(update={"counters": counters}), applying, plan, services
    )
    return record, replace(effect, retry_after_s=charge.retry_after_s)
