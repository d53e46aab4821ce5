"""Confidence, composed from independent signals, and routing. Pure functions.

The model's own opinion of itself is at most a minor input (a self-reported confidence is
not a verdict field at all). The signals, each in [0, 1]:

    verification   share of the verification node's checks that passed
    source         how far the kind of decision is trusted a priori: a synthetic
                   safeguard 1.0, a playbook entry 0.95, a model verdict 0.5
    history        model verdicts only: outcomes recorded in the ledger for the same
                   failure signature and action, each weighted by its age (halved every
                   ``HALF_LIFE_DAYS``), the last ``RECENT_OUTCOMES`` at most, then
                   Laplace-smoothed: (green + 1) / (total + 2) — 0.5 with no history,
                   higher for a recipe that went green lately
    judge          1.0 / 0.0 when a sampled second model agreed / disagreed (absent otherwise)

Why history is only a model verdict's: a playbook entry, a synthetic safeguard and an
infrastructure verdict are rules, and a rule does not become less right because other
tickets failed after it. Mixing outcomes into them let a long ledger turn a plain 429's
retry into a question for a person. Why decay: a signature's record from months ago, under
another model or another version of the project, says little about today.

Routing: ``reject`` unless verified; ``auto`` at or above the action's
threshold T; ``hitl_recommended`` within 0.2 below it; ``hitl_required`` under that.
An infrastructure verdict is routed by rule (``route_infra``): ``auto`` when verified,
whatever its confidence, so cron retries a rate limit by itself under the infra cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from orchestrator.domain.proposals import CONFIDENCE_RULES, History, Routing

WEIGHTS: Mapping[str, float] = {"verification": 0.4, "source": 0.3, "history": 0.2, "judge": 0.3}
SOURCE_PRIOR: Mapping[str, float] = {
    "synthetic": 1.0,
    "infra": 1.0,
    "playbook": 0.95,
    "model": 0.5,
}
RECOMMEND_BAND = 0.2
# An outcome's weight halves every two weeks: a month-old failure counts a quarter.
HALF_LIFE_DAYS = 14.0
# At most this many of the latest outcomes per action are read (the index serves them).
RECENT_OUTCOMES = 50
# The sources whose confidence the ledger's history feeds.
HISTORY_SOURCES = frozenset({"model"})


def signature_of(stage: str, check: str | None, failure_class: str | None) -> str:
    """A failure's signature: what the ledger's history is kept per. The same for every
    ticket (no ticket, run or attempt in it), and split by the failure's class, so the
    outcomes of infrastructure retries of a stage never count for a model verdict about
    its code. ``implement/stage/code``, ``review/project-tests/code``. Ledgers written
    before the class was part of it hold ``stage/check`` signatures, which no decision
    asks for any more: their outcomes mixed infrastructure with code."""
    return f"{stage}/{check or 'stage'}/{failure_class or 'code'}"


@dataclass(frozen=True)
class PastOutcome:
    """One recorded outcome of a decision about the signature: when, and whether green."""

    at: datetime
    green: bool


def outcome_weight(age_s: float, half_life_s: float) -> float:
    """``0.5 ** (age / half-life)``; an outcome from the future (a clock step) weighs 1."""
    return float(0.5 ** (max(age_s, 0.0) / half_life_s))


def decayed_history(
    outcomes: Iterable[PastOutcome],
    *,
    now: datetime,
    half_life_days: float = HALF_LIFE_DAYS,
    last: int = RECENT_OUTCOMES,
) -> History:
    """The weighted history of one action's outcomes: only the ``last`` most recent
    count, each weighted by its age at ``now``. Pure."""
    latest = sorted(outcomes, key=lambda o: o.at, reverse=True)[:last]
    half_life_s = half_life_days * 86400.0
    green = total = 0.0
    for outcome in latest:
        weight = outcome_weight((now - outcome.at).total_seconds(), half_life_s)
        total += weight
        green += weight if outcome.green else 0.0
    return History(green=round(green, 6), total=round(total, 6))


def compose(
    *,
    verification_score: float,
    source: str,
    history: History,
    judge_agrees: bool | None,
    rules: int = CONFIDENCE_RULES,
) -> tuple[float, dict[str, float]]:
    """The composed confidence and the signals it was made of (for the audit row).
    ``history`` counts only for a model verdict (``HISTORY_SOURCES``)."""
    signals = {
        "verification": verification_score,
        "source": SOURCE_PRIOR.get(source, 0.0),
    }
    if source in HISTORY_SOURCES or rules < 2:
        signals["history"] = history.score
    if judge_agrees is not None:
        signals["judge"] = 1.0 if judge_agrees else 0.0
    total_weight = sum(WEIGHTS[name] for name in signals)
    confidence = sum(WEIGHTS[name] * value for name, value in signals.items()) / total_weight
    return round(confidence, 4), {k: round(v, 4) for k, v in signals.items()}


def route_infra(*, verified: bool) -> Routing:
    """An infrastructure verdict's routing is a rule, not a score: retry after a back-off
    under the infra cap, or stop for what only a person can fix; either is carried out
    without asking. Only a verdict that fails verification is refused."""
    return "auto" if verified else "reject"


def route(confidence: float, *, verified: bool, threshold: float) -> Routing:
    if not verified:
        return "reject"
    if confidence >= threshold:
        return "auto"
    if confidence >= threshold - RECOMMEND_BAND:
        return "hitl_recommended"
    return "hitl_required"
