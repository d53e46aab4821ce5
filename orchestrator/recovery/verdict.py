"""The recovery verdict: a closed vocabulary of six actions, validated twice.

1. Shape (``parse_verdict``): exactly one JSON object (a single ```json fence around the
   whole reply is tolerated; prose is not), a discriminated union on ``action`` with
   ``extra="forbid"``, strict types and a length cap on every string and list.
2. Meaning (``semantic_errors``): the verdict must make sense for *this* failure — the
   engine exists and differs, the ladder has a higher model, the verification check is
   the one that failed, the recipe passes the allow-list and stays inside the clone.
   Each action's rules live with the action (``orchestrator/actions/``).

Anything that fails either step is not a verdict; the caller turns it into
``abandon-human`` (never a guess).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictStr, TypeAdapter, ValidationError

from orchestrator.domain.validation import Frozen, describe_validation_error


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

MAX_REPLY_CHARS = 64_000
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)


def verdict_json_schema() -> dict[str, Any]:
    """The JSON schema the model is constrained to (and shown in the prompt)."""
    return VERDICT_ADAPTER.json_schema()


def abandon(summary: str) -> AbandonHumanVerdict:
    return AbandonHumanVerdict(action="abandon-human", summary=summary[:2000] or "abandoned")


def parse_reply(text: str) -> tuple[object | None, str | None]:
    """The reply must be exactly one JSON object; prose before or after is malformed."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group("body").strip()
    if len(stripped) > MAX_REPLY_CHARS:
        return None, f"reply is longer than {MAX_REPLY_CHARS} characters"
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return None, f"reply is not a single JSON object ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, f"reply is JSON but not an object (got {type(value).__name__})"
    return value, None


def parse_verdict(text: str) -> tuple[Verdict | None, list[str]]:
    """Shape validation of a model's reply: (verdict, []) or (None, errors)."""
    value, error = parse_reply(text)
    if error is not None:
        return None, [error]
    return validate_verdict_object(value)


def validate_verdict_object(value: object) -> tuple[Verdict | None, list[str]]:
    """Shape validation of an already-parsed object (playbook verdicts come this way)."""
    if isinstance(value, dict) and "action" in value and value["action"] not in set(Action):
        allowed = ", ".join(a.value for a in Action)
        return None, [f"action: {value['action']!r} is not one of: {allowed}"]
    try:
        # JSON mode: strict types, and JSON arrays fill the tuple fields.
        return VERDICT_ADAPTER.validate_json(json.dumps(value)), []
    except ValidationError as exc:
        # Errors inside a union member carry its tag first ("mechanical-fix.summary"):
        # the user-facing path is the field's own.
        tags = tuple(f"{a.value}." for a in Action)
        return None, [
            e.removeprefix(next((t for t in tags if e.startswith(t)), ""))
            for e in describe_validation_error(exc)
        ]


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


def semantic_errors(verdict: Verdict, ctx: DecisionContext) -> list[str]:
    """Business rules for this failure. An empty list means the verdict may be executed.
    Each action states its own rules (``orchestrator/actions/``)."""
    # Imported here: the action modules are built on this module's verdict types.
    from orchestrator.actions.registry import rule_errors

    return rule_errors(verdict, ctx)
