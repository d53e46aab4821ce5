"""The closed vocabulary, declared: what each action is called, which verdict carries it,
its routing default, the line the prompt says about it, and its rules.

Everything that names the actions derives from ``VOCABULARY`` — the CLI's ``verdicts
--action`` choices, the ``[routing]`` keys and their defaults, the prompt's vocabulary,
and the rules a verdict is checked against. A word added here (``register``) reaches
all of them. Carrying an action out is the actions layer's (higher up), keyed by these
names; nothing here imports it, so the pure layers (config, the decision) read the vocabulary
without loading code that acts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from orchestrator.domain.recipes import plan_recipe
from orchestrator.domain.registry import Registry
from orchestrator.domain.verdicts import (
    AbandonHumanVerdict,
    DecisionContext,
    EscalateModelVerdict,
    MechanicalFixVerdict,
    RetryVerdict,
    SplitVerdict,
    SwitchEngineVerdict,
    Verdict,
    names_check,
    next_model,
)

V = TypeVar("V")


def no_checks(verdict: object, ctx: DecisionContext) -> dict[str, bool]:
    return {}


def no_errors(verdict: object, ctx: DecisionContext) -> list[str]:
    return []


@dataclass(frozen=True)
class ActionTerms(Generic[V]):
    """One action's words: its name, its verdict model, its routing default, what the
    prompt says about it, and its business rules."""

    name: str
    verdict_type: type[V]
    routing_default: float  # confidence at or above which it runs without a person
    prompt: str  # the line the model reads about it
    # Named deterministic checks for verification (each one a confidence signal) and
    # the errors that make a verdict invalid for this failure.
    checks: Callable[[V, DecisionContext], dict[str, bool]] = no_checks
    errors: Callable[[V, DecisionContext], list[str]] = no_errors
    # Charged against the ticket's retry budget before it runs.
    retry_like: bool = False


class Vocabulary(Registry[ActionTerms[Any]]):
    """Actions by name, in the order the prompt and the CLI list them."""

    def check(self, entry: ActionTerms[Any]) -> None:
        if not 0.0 <= entry.routing_default <= 1.0:
            raise ValueError(f"action {entry.name!r}: routing default must be within [0, 1]")

    def for_verdict(self, verdict: object) -> ActionTerms[Any]:
        return self.get(str(getattr(verdict, "action", "")))

    def terms(self) -> tuple[ActionTerms[Any], ...]:
        return self.entries()

    def routing_defaults(self) -> dict[str, float]:
        return {terms.name: terms.routing_default for terms in self.entries()}

    def lines(self) -> tuple[tuple[str, str], ...]:
        """(name, what the prompt says about it), in order."""
        return tuple((terms.name, terms.prompt) for terms in self.entries())


# -- the rules of each action ------------------------------------------------------------


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


def mechanical_fix_checks(verdict: MechanicalFixVerdict, ctx: DecisionContext) -> dict[str, bool]:
    return {
        "names_failing_check": ctx.failing_check is not None
        and names_check(verdict.repair_plan.verification_check, ctx.failing_check),
        "recipe_allowed": not plan_recipe(
            verdict.repair_plan.commands, clone_dir=ctx.clone_dir, allowlist=ctx.recipe_allowlist
        )[1],
    }


def mechanical_fix_errors(verdict: MechanicalFixVerdict, ctx: DecisionContext) -> list[str]:
    if ctx.failing_check is None:
        return ["mechanical-fix: the failure was not a check, so there is nothing to verify"]
    found = []
    if not names_check(verdict.repair_plan.verification_check, ctx.failing_check):
        found.append(
            f"repair_plan.verification_check: must name the failing check "
            f"{ctx.failing_check!r} (got {verdict.repair_plan.verification_check!r})"
        )
    _, recipe_errors = plan_recipe(
        verdict.repair_plan.commands, clone_dir=ctx.clone_dir, allowlist=ctx.recipe_allowlist
    )
    found.extend(f"repair_plan.commands{e}" for e in recipe_errors)
    return found


# The three re-runs share a default; an abandon is always safe, so it runs without asking.
RERUN_ROUTING_DEFAULT = 0.8

VOCABULARY = Vocabulary(
    (
        ActionTerms(
            name="retry", verdict_type=RetryVerdict, routing_default=RERUN_ROUTING_DEFAULT,
            prompt="looks transient; re-run the same stage unchanged", retry_like=True,
        ),
        ActionTerms(
            name="escalate-model", verdict_type=EscalateModelVerdict,
            routing_default=RERUN_ROUTING_DEFAULT,
            prompt="approach is sound but under-powered; re-run with the next, stronger model",
            checks=escalate_checks, errors=escalate_errors, retry_like=True,
        ),
        ActionTerms(
            name="switch-engine", verdict_type=SwitchEngineVerdict,
            routing_default=RERUN_ROUTING_DEFAULT,
            prompt="a different configured engine is a better fit; name it in `engine`",
            checks=switch_checks, errors=switch_errors, retry_like=True,
        ),
        ActionTerms(
            name="split", verdict_type=SplitVerdict, routing_default=0.9,
            prompt="the ticket bundles independent concerns; propose 2-5 `sub_tickets` (title, body)",
        ),
        ActionTerms(
            name="abandon-human", verdict_type=AbandonHumanVerdict, routing_default=0.0,
            prompt="broken in a way automation should not keep retrying",
        ),
        ActionTerms(
            name="mechanical-fix", verdict_type=MechanicalFixVerdict, routing_default=0.85,
            prompt=(
                "a known-shape violation with a deterministic repair: `repair_plan.commands` "
                "are commands run without a shell inside the clone (write <clone> for its "
                "path; only allow-listed programs), and `repair_plan.verification_check` "
                "names the failing check"
            ),
            checks=mechanical_fix_checks, errors=mechanical_fix_errors, retry_like=True,
        ),
    )
)  # fmt: skip


def rule_checks(verdict: Verdict, ctx: DecisionContext) -> dict[str, bool]:
    """The verdict's action's named business-rule checks (for verification)."""
    return VOCABULARY.for_verdict(verdict).checks(verdict, ctx)


def semantic_errors(verdict: Verdict, ctx: DecisionContext) -> list[str]:
    """Business rules for this failure: the verdict's action's rules, broken. An empty
    list means the verdict may be executed."""
    return VOCABULARY.for_verdict(verdict).errors(verdict, ctx)
