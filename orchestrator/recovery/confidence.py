"""Confidence, composed from independent signals, and routing. Pure functions.

The model's own opinion of itself is at most a minor input (a self-reported confidence is
not a verdict field at all). The signals, each in [0, 1]:

    verification   share of the verification node's checks that passed
    source         how far the kind of decision is trusted a priori: a synthetic
                   safeguard 1.0, a playbook entry 0.95, a model verdict 0.5
    history        outcomes recorded in the ledger for the same failure signature and
                   action, Laplace-smoothed: (green + 1) / (total + 2) — 0.5 with no history,
                   higher for a recipe that went green before
    judge          1.0 / 0.0 when a sampled second model agreed / disagreed (absent otherwise)

Routing: ``reject`` unless verified; ``auto`` at or above the action's
threshold T; ``hitl_recommended`` within 0.2 below it; ``hitl_required`` under that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from orchestrator.domain.validation import Frozen

Routing = Literal["auto", "hitl_recommended", "hitl_required", "reject"]

WEIGHTS: Mapping[str, float] = {"verification": 0.4, "source": 0.3, "history": 0.2, "judge": 0.3}
SOURCE_PRIOR: Mapping[str, float] = {
    "synthetic": 1.0,
    "infra": 1.0,
    "playbook": 0.95,
    "model": 0.5,
}
RECOMMEND_BAND = 0.2


class History(Frozen):
    """What the ledger remembers about this failure signature and action."""

    green: int = 0
    total: int = 0

    @property
    def score(self) -> float:
        return (self.green + 1) / (self.total + 2)


def compose(
    *, verification_score: float, source: str, history: History, judge_agrees: bool | None
) -> tuple[float, dict[str, float]]:
    """The composed confidence and the signals it was made of (for the audit row)."""
    signals = {
        "verification": verification_score,
        "source": SOURCE_PRIOR.get(source, 0.0),
        "history": history.score,
    }
    if judge_agrees is not None:
        signals["judge"] = 1.0 if judge_agrees else 0.0
    total_weight = sum(WEIGHTS[name] for name in signals)
    confidence = sum(WEIGHTS[name] * value for name, value in signals.items()) / total_weight
    return round(confidence, 4), {k: round(v, 4) for k, v in signals.items()}


def route(confidence: float, *, verified: bool, threshold: float) -> Routing:
    if not verified:
        return "reject"
    if confidence >= threshold:
        return "auto"
    if confidence >= threshold - RECOMMEND_BAND:
        return "hitl_recommended"
    return "hitl_required"
