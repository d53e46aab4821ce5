"""What carrying out one action takes: its plan (pure) and its apply (does it).

The action's words (verdict model, routing default, prompt line, rules) are declared in
``orchestrator/domain/vocabulary.py``; the registry here holds these by the same name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, PlanFacts
    from orchestrator.domain.runs import RunRecord
    from orchestrator.execution.attempts import StageServices

V = TypeVar("V")


@dataclass(frozen=True)
class ActionSteps(Generic[V]):
    """One action's code, under its vocabulary name.

    ``apply`` carries out the plan ``plan`` made and nothing else; it imports the code
    it runs with when called."""

    name: str
    plan: Callable[[V, PlanFacts], Dispatch]
    apply: Callable[[RunRecord, DecisionToApply, Dispatch, StageServices], tuple[RunRecord, Effect]]
