"""One batch's model budget, shared by its worker processes: calls, tokens and estimated
cost in ``.state/batches/<batch-id>/budget.json``, updated under an exclusive flock.

Checked before each call: a call is reserved (counted) before it is made, so concurrent
workers cannot both take the last one; its tokens and cost are added when it returns.
The estimate can overshoot ``max_cost_usd`` by at most the calls already in flight.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, Unavailable
from orchestrator.storage.atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.locks import flock

BATCH_ENV = "ORCH_BATCH_ID"


@dataclass(frozen=True)
class Spend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


def estimate_cost(prices: dict[str, PriceConfig], model: str, inp: int, out: int) -> float:
    price = prices.get(model)
    if price is None:
        return 0.0
    return (inp * price.input_per_mtok + out * price.output_per_mtok) / 1_000_000


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
    (``BatchBudget``), or a fleet's in Redis (``distributed.fleet_budget``)."""

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


class BudgetedGateway:
    """Wraps a gateway: every call is reserved against the batch budget first. The
    first call's reservation may have been made already (``reserved``), by the factory."""

    def __init__(
        self, inner: ModelGateway, budget: SharedBudget, *, reserved: bool = False
    ) -> None:
        self.inner = inner
        self.budget = budget
        self.model_name = inner.model_name
        self._reserved = reserved

    def complete(self, request: ModelRequest) -> ModelReply:
        refusal = None if self._reserved else self.budget.reserve()
        self._reserved = False
        if refusal is not None:
            return ModelReply(text=None, model=self.model_name, error=refusal)
        reply = self.inner.complete(request)
        self.budget.record(reply.model or self.model_name, reply.input_tokens, reply.output_tokens)
        return reply


def budgeted_factory(
    inner: Callable[[], ModelGateway | Unavailable | None], budget: SharedBudget
) -> Callable[[], ModelGateway | Unavailable | None]:
    """A diagnosis that starts after the budget is spent asks nobody, and is not made:
    it waits for the next batch (``Unavailable.defer``), whose budget is fresh.

    The diagnosis's first call is reserved here, before the gateway is handed out (and
    the ticket charged for it): a decision that gets a gateway gets its call, so the
    ticket is never charged a diagnosis another worker's call then took from it. A
    gateway built but never called leaves its reservation counted (an overcount by one,
    never a call over the cap)."""

    def build() -> ModelGateway | Unavailable | None:
        refusal = over_cap(budget.read(), budget.caps)
        if refusal is not None:
            return Unavailable(refusal, defer=True)
        gateway = inner()
        if gateway is None or isinstance(gateway, Unavailable):
            return gateway
        refusal = budget.reserve()
        if refusal is not None:  # another worker took the last call meanwhile
            return Unavailable(refusal, defer=True)
        return BudgetedGateway(gateway, budget, reserved=True)

    return build
