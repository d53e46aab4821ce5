"""The closed vocabulary's words: the six verdicts a decision may return, and the facts
a verdict is checked against.

A verdict is a discriminated union on ``action`` with ``extra="forbid"``, strict types
and a length cap on every string and list. What each action means, its routing default
and its rules are in ``vocabulary.py`` beside this module; reading a verdict out of a
model's reply is the recovery layer's; carrying one out is the actions layer's, above.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictStr, TypeAdapter

from orchestrator.domain.validation import Frozen


class Action(StrEnum):
    RETRY = "retry"
    ESCALATE_MODEL = "escalate-model"
    SWITCH_ENGINE = "switch-engine"
    SPLIT = "split"
    ABANDON_HUMAN = "abandon-human"
    MECHANICAL_FIX = "mechanical-fix"


Summary = Annotated[StrictStr, Field(min_length=1, max_length=2000, pattern=r"\S")]
Title = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"\S")]
Body = Annotated[StrictStr, Field(min_length=1, max_length=8000, pattern=r"\S")]
CommandText = Annotated[StrictStr, Field(min_length=1, max_length=1000, pattern=r"\S")]
EngineName = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


class _Verdict(Frozen):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    summary: Summary


class RetryVerdict(_Verdict):
    """Looks transient: re-run the same stage unchanged."""

    action: Literal["retry"]


class EscalateModelVerdict(_Verdict):
    """Sound approach, under-powered: re-run with the next model in the engine's ladder."""

    action: Literal["escalate-model"]


class SwitchEngineVerdict(_Verdict):
    """Another engine fits better: re-run there."""

    action: Literal["switch-engine"]
    engine: EngineName


class SubTicket(Frozen):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    title: Title
    body: Body


class SplitVerdict(_Verdict):
    """The ticket bundles independent concerns: propose sub-tickets."""

    action: Literal["split"]
    sub_tickets: Annotated[tuple[SubTicket, ...], Field(min_length=2, max_length=5)]


class AbandonHumanVerdict(_Verdict):
    """Broken in a way automation should not keep retrying."""

    action: Literal["abandon-human"]


class RepairPlan(Frozen):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    verification_check: Annotated[StrictStr, Field(min_length=1, max_length=300, pattern=r"\S")]
    commands: Annotated[tuple[CommandText, ...], Field(min_length=1, max_length=20)]


class MechanicalFixVerdict(_Verdict):
    """A known-shape violation with a deterministic repair recipe."""

    action: Literal["mechanical-fix"]
    repair_plan: RepairPlan


Verdict = Annotated[
    RetryVerdict
    | EscalateModelVerdict
    | SwitchEngineVerdict
    | SplitVerdict
    | AbandonHumanVerdict
    | MechanicalFixVerdict,
    Field(discriminator="action"),
]
VERDICT_ADAPTER: TypeAdapter[Verdict] = TypeAdapter(Verdict)


def verdict_json_schema() -> dict[str, Any]:
    """The JSON schema the model is constrained to (and shown in the prompt)."""
    return VERDICT_ADAPTER.json_schema()


def abandon(summary: str) -> AbandonHumanVerdict:
    return AbandonHumanVerdict(action="abandon-human", summary=summary[:2000] or "abandoned")


class DecisionContext(Frozen):
    """The facts a verdict is checked against: what failed, and what is configured."""

    failing_stage: str
    failing_check: str | None
    code_stage: str  # the stage that produced the code (re-run by retry-like actions)
    current_engine: str | None
    current_model: str | None
    ladders: Mapping[str, tuple[str, ...]]  # engine → models, weakest first
    clone_dir: Path
    recipe_allowlist: tuple[str, ...]


def next_model(ladder: tuple[str, ...], current: str | None) -> str | None:
    """The model after ``current`` in ``ladder`` (None at the top or when not on it)."""
    if current is None or current not in ladder:
        return ladder[0] if ladder and current is None else None
    index = ladder.index(current)
    return ladder[index + 1] if index + 1 < len(ladder) else None


def names_check(reference: str, check: str) -> bool:
    """``lint-bug-commit-order`` or a command ending in it
    (``bash scripts/dev.sh lint-bug-commit-order``) names that check. Only a reference:
    the verifier that runs is always the check's command from config."""
    words = reference.split()
    return reference.strip() == check or (bool(words) and words[-1] == check)
