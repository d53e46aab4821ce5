"""retry · escalate-model · switch-engine: all three re-run the stage that produced the
code (then everything after it); the last two first set which engine and model it uses.

    retry            unchanged
    escalate-model   the next model in that stage's engine ladder
    switch-engine    the named engine, with its first model
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, PlanFacts
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.runs import engine_and_model
from orchestrator.domain.verdicts import (
    EscalateModelVerdict,
    RetryVerdict,
    SwitchEngineVerdict,
    next_model,
)

if TYPE_CHECKING:
    from orchestrator.domain.config import Config
    from orchestrator.domain.runs import RunRecord
    from orchestrator.execution.attempts import StageServices


def plan_retry(verdict: RetryVerdict, facts: PlanFacts) -> Dispatch:
    return Dispatch(verdict.action, facts.approval, rerun=facts.code.name)


def plan_escalate(verdict: EscalateModelVerdict, facts: PlanFacts) -> Dispatch:
    engine, model = engine_and_model(facts.record, facts.code, facts.config)
    if engine not in facts.config.engines:
        return Dispatch(
            verdict.action, facts.approval, error=f"engine {engine!r} is not configured"
        )
    stronger = next_model(facts.config.engines[engine].models, model or None)
    return Dispatch(
        verdict.action, facts.approval, rerun=facts.code.name, engine=engine, model=stronger
    )


def plan_switch(verdict: SwitchEngineVerdict, facts: PlanFacts) -> Dispatch:
    if verdict.engine not in facts.config.engines:
        return Dispatch(
            verdict.action, facts.approval, error=f"engine {verdict.engine!r} is not configured"
        )
    ladder = facts.config.engines[verdict.engine].models
    return Dispatch(
        verdict.action, facts.approval, rerun=facts.code.name, engine=verdict.engine,
        model=ladder[0] if ladder else None,
    )  # fmt: skip


def apply(
    record: RunRecord, applying: DecisionToApply, plan: Dispatch, services: StageServices
) -> tuple[RunRecord, Effect]:
    """Set the plan's engine and model for the stage (if it names one) and re-run it."""
    from orchestrator.domain.runs import StageOverride

    assert plan.rerun is not None  # every re-run plan names its stage
    if plan.engine is not None:
        override = StageOverride(engine=plan.engine, model=plan.model)
        record = record.model_copy(update={"overrides": {**record.overrides, plan.rerun: override}})
    record = told_about(record, plan.rerun, applying, services.loaded.config)
    if plan.action == "escalate-model":
        outcome = f"escalate-model: re-running {plan.rerun} with {plan.engine}/{plan.model}"
    elif plan.action == "switch-engine":
        outcome = f"switch-engine: re-running {plan.rerun} with {plan.engine}"
    else:
        outcome = f"retry: re-running {plan.rerun}"
    return rerun_from(record, plan.rerun, outcome)


def told_about(
    record: RunRecord, stage: str, applying: DecisionToApply, config: Config
) -> RunRecord:
    """Record that ``stage``'s next attempts are told about this decision's failure (the
    "previous attempt" section of an engine's prompt: ``execution/feedback.py``). Only an
    engine stage is told, only after a code failure: after an infrastructure failure
    (``source == "infra"``) the code was never judged, so the feedback it had stands."""
    stage_config = next((s for s in config.stages if s.name == stage), None)
    if (
        not config.recovery.engine_feedback
        or applying.source == "infra"
        or stage_config is None
        or stage_config.engine is None
    ):
        return record
    return record.model_copy(update={"feedback": {**record.feedback, stage: applying.number}})


def rerun_from(record: RunRecord, stage: str, outcome: str) -> tuple[RunRecord, Effect]:
    """Reset ``stage`` and every stage after it, and continue from ``stage``."""
    return record.reset_stages_from(stage), Effect(outcome=outcome, resume_at=stage)


STEPS: tuple[ActionSteps[Any], ...] = (
    ActionSteps(name="retry", plan=plan_retry, apply=apply),
    ActionSteps(name="escalate-model", plan=plan_escalate, apply=apply),
    ActionSteps(name="switch-engine", plan=plan_switch, apply=apply),
)
