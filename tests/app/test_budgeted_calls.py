"""The batch budget's gateway factory: a spent budget defers the decision (no call, no
charge), and a gateway handed out has its first call reserved already, so the diagnosis
the ticket is charged for is never refused afterwards."""

from __future__ import annotations

from pathlib import Path

from orchestrator.app.budgeted_calls import budgeted_factory
from orchestrator.domain.config import BatchConfig
from orchestrator.recovery.gateway import ModelRequest, ScriptedGateway, Unavailable
from orchestrator.storage.batch_budget import BatchBudget

REQUEST = ModelRequest(system="s", prompt="p", json_schema={}, max_tokens=10)


def budget(tmp_path: Path, calls: int) -> BatchBudget:
    return BatchBudget(tmp_path / "budget.json", BatchConfig(max_model_calls=calls), {})


def test_a_spent_budget_defers_rather_than_abandons(tmp_path: Path) -> None:
    spent = budget(tmp_path, 1)
    assert spent.reserve() is None
    made = budgeted_factory(lambda: ScriptedGateway(["{}"]), spent)()
    assert made == Unavailable("batch budget spent: 1/1 model calls", defer=True)


def test_the_first_call_is_reserved_when_the_gateway_is_handed_out(tmp_path: Path) -> None:
    shared = budget(tmp_path, 1)
    factory = budgeted_factory(lambda: ScriptedGateway(["first", "second"]), shared)
    mine = factory()
    assert not isinstance(mine, Unavailable) and mine is not None
    # Another worker asks after us: the last call is already ours.
    assert isinstance(factory(), Unavailable)
    reply = mine.complete(REQUEST)
    assert reply.text == "first" and shared.read().calls == 1
    # A second call (a re-ask) needs a reservation of its own, and the cap holds.
    refused = mine.complete(REQUEST)
    assert refused.text is None and refused.error == "batch budget spent: 1/1 model calls"
