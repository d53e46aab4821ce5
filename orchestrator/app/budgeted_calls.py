"""The gateways a batch's decisions are handed: every model call reserved against the
batch's shared budget first (``storage.batch_budget``: the local file, or the fleet's
Redis budget), so a batch never pays for a call over its cap. Beside
``journaled_calls.py``, the other wrapper a decision's gateway goes through."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, Unavailable
from orchestrator.storage.batch_budget import SharedBudget, over_cap


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
