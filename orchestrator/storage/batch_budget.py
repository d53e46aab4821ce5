"""One batch's model budget, shared by its worker processes: calls, tokens and estimated
cost in ``.state/batches/<batch-id>/budget.json``, updated under an exclusive flock.

Checked before each call: a call is reserved (counted) before it is made, so concurrent
workers cannot both take the last one; its tokens and cost are added when it returns.
The estimate can overshoot ``max_cost_usd`` by at most the calls already in flight.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage._locks import flock
from orchestrator.storage.crash_points import CrashPoint, crash_point

BATCH_ENV = "ORCH_BATCH_ID"


@dataclass(frozen=True)
class Spend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


def estimate_cost(prices: dict[str, PriceConfig], model: str, inp: int, out: int) -> float:
    price = prices.get(model)
    return 0.0 if price is None else price.cost_usd(inp, out)


def over_cap(spend: Spend, caps: BatchConfig) -> str | None:
    """Why no further call may be made, or None."""
    if caps.max_model_calls and spend.calls >= caps.max_model_calls:
        return f"batch budget spent: {spend.calls}/{caps.max_model_calls} model calls"
    tokens = spend.input_tokens + spend.output_tokens
    if caps.max_tokens and tokens >= caps.max_tokens:
        return f"batch budget spent: {tokens}/{caps.max_tokens} tokens"
    if caps.max_cost_usd and spend.cost_usd >= caps.max_cost_usd:
        return f"batch budget spent: ${spend.cost_usd:.4f} of ${caps.max_cost_usd:.2f}"
    return None


class SharedBudget(Protocol):
    """What a batch's gateway asks of its budget: the local batch's file under a flock
    (``BatchBudget``), or a fleet's in Redis (``storage.redis.fleet_budget``)."""

    caps: BatchConfig

    def read(self) -> Spend: ...

    def reserve(self) -> str | None: ...

    def record(self, model: str, input_tokens: int, output_tokens: int) -> None: ...


class BatchBudget:
    def __init__(self, path: Path, caps: BatchConfig, prices: dict[str, PriceConfig]) -> None:
        self.path = path
        self.caps = caps
        self.prices = prices

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with flock(self.path.with_suffix(".lock")):
            yield

    def read(self) -> Spend:
        try:
            return Spend(**json.loads(self.path.read_bytes()))
        except FileNotFoundError:
            return Spend()

    def _write(self, spend: Spend) -> None:
        atomic_write(self.path, json.dumps(spend.__dict__, sort_keys=True).encode())
        crash_point(CrashPoint.BATCH_BUDGET)

    def reserve(self) -> str | None:
        """Count one call if the budget allows it; otherwise say why not."""
        with self._locked():
            spend = self.read()
            refusal = over_cap(spend, self.caps)
            if refusal is None:
                self._write(
                    Spend(spend.calls + 1, spend.input_tokens, spend.output_tokens, spend.cost_usd)
                )
            return refusal

    def record(self, model: str, input_tokens: int, output_tokens: int) -> None:
        with self._locked():
            spend = self.read()
            cost = estimate_cost(self.prices, model, input_tokens, output_tokens)
            self._write(
                Spend(
                    spend.calls,
                    spend.input_tokens + input_tokens,
                    spend.output_tokens + output_tokens,
                    round(spend.cost_usd + cost, 6),
                )
            )
