"""The verdict actions' code, by the vocabulary's names: what carrying out each one takes.

The words (names, verdict models, routing defaults, prompt lines, rules) are
``orchestrator/domain/vocabulary.py``'s; this registry holds each action's plan and apply
under the same name, and the substrate looks them up here.

``plan_for`` states what the substrate will do with a proposal; the substrate carries out
exactly that plan, and replay compares it (``plan_dispatch``: the failing stage looked up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.actions import abandon, mechanical_fix, rerun, split
from orchestrator.actions.plan import Dispatch, PlanFacts, rerun_stage_for
from orchestrator.actions.proposal import failure_of, halt_of, verdict_of
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.registry import Registry
from orchestrator.domain.verdicts import AbandonHumanVerdict
from orchestrator.domain.verdicts import abandon as abandon_verdict

if TYPE_CHECKING:
    from orchestrator.domain.config import Config, StageConfig
    from orchestrator.domain.proposals import Proposal
    from orchestrator.domain.runs import RunRecord


class ActionRegistry(Registry[ActionSteps[Any]]):
    """Each action's steps, by its vocabulary name."""


REGISTRY = ActionRegistry((*rerun.STEPS, split.SPEC, abandon.SPEC, mechanical_fix.SPEC))


def plan_dispatch(proposal: Proposal, config: Config, record: RunRecord) -> Dispatch:
    """``plan_for`` the failing stage the proposal names, looked up in ``config``."""
    named = {stage.name: stage for stage in config.stages}
    return plan_for(proposal, named.get(failure_of(proposal).stage), config, record)


def plan_for(
    proposal: Proposal, failing: StageConfig | None, config: Config, record: RunRecord
) -> Dispatch:
    """What ``apply`` does with ``proposal`` once approved, stated as data and doing none
    of it: the substrate carries out exactly this plan, and replay compares it. Derived
    from the proposal's evidence and the trusted config only (``failing``: the stage it
    names there, None when it is not, which is refused). ``record`` is the run as it
    stood at the decision. The retry budget is the ticket's spend state, not part of the
    decision, and is not considered."""
    approval = "auto" if proposal.routing in ("auto", "reject") else "person"
    verdict = verdict_of(proposal)
    failure, halt = failure_of(proposal), halt_of(proposal)
    if failing is None:
        return Dispatch(
            verdict.action, approval, error=f"stage {failure.stage!r} is not in today's config"
        )
    if proposal.routing == "reject" and not isinstance(verdict, AbandonHumanVerdict):
        verdict = abandon_verdict("proposal rejected")  # as the substrate does: never run
    facts = PlanFacts(
        config=config,
        record=record,
        approval=approval,
        failing=failing,
        code=rerun_stage_for(config, failing, infra=failure.infra),
        failing_check=failure.check,
        halt_reason=halt.reason.value if halt.reason is not None else None,
        cap_exhausted=halt.cap_exhausted,
    )
    return REGISTRY.get(verdict.action).plan(verdict, facts)
