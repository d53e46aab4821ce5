"""``attempts.engine_cost``: the engine's own cost when it says one, else an estimate from
its tokens and ``[prices]`` marked as ours, else unknown."""

from __future__ import annotations

from orchestrator.domain.config import PriceConfig
from orchestrator.engines.base import EngineReport, Usage
from orchestrator.execution.attempts import engine_cost

PRICES = {"claude-sonnet-4-6": PriceConfig(input_per_mtok=3.0, output_per_mtok=15.0)}


def report(cost: float | None, usage: Usage) -> EngineReport:
    return EngineReport(3, cost, "done", None, None, usage)


def test_the_engines_own_cost_wins() -> None:
    said = report(0.25, Usage(input_tokens=1_000_000, output_tokens=0))
    assert engine_cost(said, "claude-sonnet-4-6", PRICES) == (0.25, False)


def test_without_one_the_tokens_are_priced_and_marked_an_estimate() -> None:
    used = Usage(
        input_tokens=1_000, output_tokens=2_000, cache_read_tokens=500, cache_write_tokens=500
    )
    # 2,000 sent (cached input priced as input) at $3/Mtok + 2,000 out at $15/Mtok.
    assert engine_cost(report(None, used), "claude-sonnet-4-6", PRICES) == (0.036, True)
    # aider names the model with its provider in front.
    assert engine_cost(report(None, used), "anthropic/claude-sonnet-4-6", PRICES) == (0.036, True)


def test_unknown_tokens_or_an_unpriced_model_leave_the_cost_unknown() -> None:
    assert engine_cost(report(None, Usage()), "claude-sonnet-4-6", PRICES) == (None, False)
    used = Usage(input_tokens=10, output_tokens=10)
    assert engine_cost(report(None, used), "gpt-5-codex", PRICES) == (None, False)
    assert engine_cost(report(None, used), None, PRICES) == (None, False)
