"""retry · escalate-model · switch-engine: all three re-run the stage that produced the
code (then everything after it); the last two first set which engine and model it uses.

    retry            unchanged
    escalate-model   the next model in that stage's engine ladder
    switch-engine    the named engine, with its first model
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.actions.plan import Applying, Dispatch, Effect, PlanFacts, engine_and_model
from orchestrator.actions.spec import ActionSpec
from orchestrator.recovery.verdict import (
    DecisionContext,
    EscalateModelVerdict,
    RetryVerdict,
    SwitchEngineVerdict,
    next_model,
)

if TYPE_CHECKING:
    from orchestrator.execution.attempts import Services
    from orchestrator.storage.runs import RunRecord

RETRY_PROMPT = "looks transient; re-run the same stage unchanged"
ESCALATE_PROMPT = "approach is sound but under-powered; re-run with the next, stronger model"
SWITCH_PROMPT = "a different configured engine is a better fit; name it in `engine`"
ROUTING_DEFAULT = 0.8


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


def escalate_checks(verdict: EscalateModelVerdict, ctx: DecisionContext) -> dict[str, bool]:
    ladder = ctx.ladders.get(ctx.current_engine or "", ())
    return {"ladder_has_stronger": next_model(ladder, ctx.current_model) is not None}


def escalate_errors(verdict: EscalateModelVerdict, ctx: DecisionContext) -> list[str]:
    if ctx.current_engine is None:
        return [f"escalate-model: stage {ctx.code_stage!r} runs no engine with a model ladder"]
    ladder = ctx.ladders.get(ctx.current_engine, ())
    if next_model(ladder, ctx.current_model) is None:
        return [
            f"escalate-model: no model above {ctx.current_model!r} in engine "
            f"{ctx.current_engine!r}'s ladder {list(ladder)}"
        ]
    return []


def switch_checks(verdict: SwitchEngineVerdict, ctx: DecisionContext) -> dict[str, bool]:
    return {"engine_exists": verdict.engine in ctx.ladders}


def switch_errors(verdict: SwitchEngineVerdict, ctx: DecisionContext) -> list[str]:
    if verdict.engine not in ctx.ladders:
        return [f"engine: {verdict.engine!r} is not a configured engine ({sorted(ctx.ladders)})"]
    if verdict.engine == ctx.current_engine:
        return [f"engine: {verdict.engine!r} is the engine that just failed"]
    return []


def apply(
    record: RunRecord, applying: Applying, plan: Dispatch, services: Services
) -> tuple[RunRecord, Effect]:
    """Set the plan's engine and model for the stage (if it names one) and re-run it."""
    from orchestrator.storage.runs import StageOverride

    assert plan.rerun is not None  # every re-run plan names its stage
    if plan.engine is not None:
        override = StageOverride(engine=plan.engine, model=plan.model)
        record = record.model_copy(update={"overrides": {**record.overrides, plan.rerun: override}})
    if plan.action == "escalate-model":
        outcome = f"escalate-model: re-running {plan.rerun} with {plan.engine}/{plan.model}"
    elif plan.action == "switch-engine":
        outcome = f"switch-engine: re-running {plan.rerun} with {plan.engine}"
    else:
        outcome = f"retry: re-running {plan.rerun}"
    return rerun_from(record, plan.rerun, outcome)


def rerun_from(record: RunRecord, stage: str, outcome: str) -> tuple[RunRecord, Effect]:
    """Reset ``stage`` and every stage after it, and continue from ``stage``."""
    return record.reset_stages_from(stage), Effect(outcome=outcome, resume_at=stage)


SPECS: tuple[ActionSpec[Any], ...] = (
    ActionSpec(
        name="retry", verdict_type=RetryVerdict, routing_default=ROUTING_DEFAULT,
        prompt=RETRY_PROMPT, plan=plan_retry, apply=apply, retry_like=True,
    ),
    ActionSpec(
        name="escalate-model", verdict_type=EscalateModelVerdict,
        routing_default=ROUTING_DEFAULT, prompt=ESCALATE_PROMPT, plan=plan_escalate,
        apply=apply, checks=escalate_checks, errors=escalate_errors, retry_like=True,
    ),
    ActionSpec(
        name="switch-engine", verdict_type=SwitchEngineVerdict,
        routing_default=ROUTING_DEFAULT, prompt=SWITCH_PROMPT, plan=plan_switch, apply=apply,
        checks=switch_checks, errors=switch_errors, retry_like=True,
    ),
)  # fmt: skip
