"""What one verdict action is, declared: the registry holds these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from orchestrator.actions.plan import Applying, Dispatch, Effect, PlanFacts
    from orchestrator.execution.attempts import Services
    from orchestrator.recovery.verdict import DecisionContext
    from orchestrator.storage.runs import RunRecord

V = TypeVar("V")


def no_checks(verdict: object, ctx: DecisionContext) -> dict[str, bool]:
    return {}


def no_errors(verdict: object, ctx: DecisionContext) -> list[str]:
    return []


@dataclass(frozen=True)
class ActionSpec(Generic[V]):
    """One action: its name, its verdict model, its routing default, what the prompt
    says about it, its business rules, its plan (pure) and its apply (does it).

    ``apply`` carries out the plan ``plan`` made and nothing else; it imports the code
    it runs with when called, so the declaration stays importable by the pure layers."""

    name: str
    verdict_type: type[V]
    routing_default: float  # confidence at or above which it runs without a person
    prompt: str  # the line the model reads about it
    plan: Callable[[V, PlanFacts], Dispatch]
    apply: Callable[[RunRecord, Applying, Dispatch, Services], tuple[RunRecord, Effect]]
    # Named deterministic checks for verification (each one a confidence signal) and
    # the errors that make a verdict invalid for this failure.
    checks: Callable[[V, DecisionContext], dict[str, bool]] = no_checks
    errors: Callable[[V, DecisionContext], list[str]] = no_errors
    # Charged against the ticket's retry budget before it runs.
    retry_like: bool = False
