"""The fleet's budget: one atomic check-and-charge, never exceeded, once per key."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.app.budgeted_calls import BudgetedGateway
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.recovery.gateway import ModelReply, ModelRequest
from orchestrator.storage.batch_budget import BatchBudget, Spend
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.fleet_budget import Charged, FleetBatchBudget, FleetBudget, Refused

from support.fleet_fixtures import Workers
from support.redis_server import RedisServer


@pytest.mark.slow
def test_concurrent_worker_processes_never_exceed_the_cap_and_each_unit_is_counted_once(
    redis_server: RedisServer, namespace: str, workers: Workers
) -> None:
    cap, processes, attempts = 100, 6, 40  # 240 attempts at 100 calls
    started = workers.start_together(
        "charger.py",
        [[redis_server.url, namespace, "B-1", str(cap), str(attempts), f"w{k}"] for k in range(processes)],
    )  # fmt: skip
    lines = [line for process in started for line in workers.finish(process)]
    charged = [line for line in lines if line.startswith("charged ")]
    refused = [line for line in lines if line.startswith("refused ")]
    assert len(charged) + len(refused) == processes * attempts
    # Every accepted charge saw its own new total: 1..cap, each exactly once.
    assert sorted(int(line.split()[1]) for line in charged) == list(range(1, cap + 1))
    assert {line.split()[2] for line in charged} == {"False"}
    assert {line for line in refused} == {f"refused {cap}"}
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    assert FleetBudget(store, "B-1", "calls", cap).spent() == cap


def test_charges_of_different_sizes_from_threads_add_up_exactly_under_the_cap(
    redis_server: RedisServer, namespace: str
) -> None:
    cap, threads, attempts = 250, 8, 30
    results: list[list[tuple[int, Charged | Refused]]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads)

    def charge(index: int) -> None:
        store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
        budget = FleetBudget(store, "B-1", "tokens", cap)
        amounts = random.Random(index).choices(range(1, 8), k=attempts)
        store.ping()
        barrier.wait()
        for i, amount in enumerate(amounts):
            results[index].append((amount, budget.charge(f"t{index}-{i}", amount)))
        store.close()

    running = [threading.Thread(target=charge, args=(i,)) for i in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    outcomes = [pair for per_thread in results for pair in per_thread]
    accepted = sorted((r.total, amount) for amount, r in outcomes if isinstance(r, Charged))
    # Serialised: each accepted charge's total is the previous total plus its amount.
    previous = 0
    for total, amount in accepted:
        assert total == previous + amount
        previous = total
    assert previous <= cap
    for amount, result in outcomes:
        if isinstance(result, Refused):
            assert result.spent + amount > cap, (amount, result)
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    assert FleetBudget(store, "B-1", "tokens", cap).spent() == previous


def test_a_redelivered_charge_with_the_same_key_is_not_counted_twice(
    store: CoordinationStore,
) -> None:
    budget = FleetBudget(store, "B-1", "calls", 3)
    assert budget.charge("T-1:run:decision-1:call-1") == Charged(total=1, duplicate=False)
    assert budget.charge("T-2:run:decision-1:call-1") == Charged(total=2, duplicate=False)
    assert budget.charge("T-1:run:decision-1:call-1") == Charged(total=2, duplicate=True)
    assert budget.spent() == 2
    assert budget.charge("T-3:run:decision-1:call-1", 2) == Refused(
        spent=2, cap=3, amount=2, meter="calls"
    )
    assert budget.charge("T-3:run:decision-1:call-1", 1) == Charged(total=3, duplicate=False)
    # Spent to the cap, a charge already made still answers as made.
    assert budget.charge("T-1:run:decision-1:call-1") == Charged(total=3, duplicate=True)
    refused = budget.charge("T-4:run:decision-1:call-1")
    assert isinstance(refused, Refused)
    assert refused.reason == "batch budget spent: 3/3 calls (a charge of 1 was refused)"


@pytest.mark.slow
def test_redelivered_charges_racing_from_several_processes_count_once(
    redis_server: RedisServer, namespace: str, workers: Workers
) -> None:
    # Four deliveries of the same 30 charges (the same keys), all at once.
    started = workers.start_together(
        "charger.py", [[redis_server.url, namespace, "B-1", "0", "30", "same"] for _ in range(4)]
    )
    lines = [line for process in started for line in workers.finish(process)]
    fresh = [line for line in lines if line.endswith(" False")]
    assert sorted(int(line.split()[1]) for line in fresh) == list(range(1, 31))
    assert sum(line.endswith(" True") for line in lines) == 90
    assert (
        FleetBudget(
            CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace), "B-1", "calls", 0
        ).spent()
        == 30
    )


def test_batches_and_meters_have_budgets_of_their_own(store: CoordinationStore) -> None:
    assert FleetBudget(store, "B-1", "calls", 1).charge("k") == Charged(1, False)
    assert FleetBudget(store, "B-2", "calls", 1).charge("k") == Charged(1, False)
    assert FleetBudget(store, "B-1", "tokens", 5).charge("k", 5) == Charged(5, False)
    assert isinstance(FleetBudget(store, "B-1", "calls", 1).charge("other"), Refused)


# ------------------------------------------------------------------ the [batch] budget


class CountingGateway:
    """A scripted model: every call answers the same, and is counted."""

    model_name = "model-a"

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelReply:
        with self._lock:
            self.calls += 1
        return ModelReply(text="{}", model=self.model_name, input_tokens=100, output_tokens=10)


REQUEST = ModelRequest(system="s", prompt="p", json_schema={}, max_tokens=256)


def test_workers_sharing_the_batch_budget_make_exactly_the_capped_number_of_model_calls(
    redis_server: RedisServer, namespace: str
) -> None:
    caps = BatchConfig(max_model_calls=37)
    model = CountingGateway()
    threads, calls_each = 8, 10
    refusals: list[str | None] = []
    barrier = threading.Barrier(threads)

    def worker() -> None:
        store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
        gateway = BudgetedGateway(model, FleetBatchBudget(store, "B-1", caps, {}))  # type: ignore[arg-type]
        store.ping()
        barrier.wait()
        for _ in range(calls_each):
            refusals.append(gateway.complete(REQUEST).error)
        store.close()

    running = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    assert model.calls == 37
    assert Counter(refusals) == {None: 37, "batch budget spent: 37/37 model calls": 43}
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    assert FleetBatchBudget(store, "B-1", caps, {}).read() == Spend(37, 3700, 370, 0.0)


def test_the_fleet_batch_budget_decides_as_the_local_one_does(
    store: CoordinationStore, tmp_path: Path
) -> None:
    caps = BatchConfig(max_tokens=1000, max_cost_usd=0.05)
    prices = {"model-a": PriceConfig(input_per_mtok=10.0, output_per_mtok=50.0)}
    fleet = FleetBatchBudget(store, "B-1", caps, prices)
    local = BatchBudget(tmp_path / "budget.json", caps, prices)
    steps: list[tuple[str | None, str | None]] = []
    for _ in range(6):
        steps.append((fleet.reserve(), local.reserve()))
        if steps[-1] == (None, None):  # the call was made: its usage comes back
            fleet.record("model-a", 250, 60)
            local.record("model-a", 250, 60)
    assert [fleet_says for fleet_says, _ in steps] == [local_says for _, local_says in steps]
    assert [s for s, _ in steps] == [None] * 4 + ["batch budget spent: 1240/1000 tokens"] * 2
    assert fleet.read() == local.read() == Spend(4, 1000, 240, 0.022)


def test_a_redelivered_reservation_or_record_with_its_key_counts_once(
    store: CoordinationStore,
) -> None:
    budget = FleetBatchBudget(store, "B-1", BatchConfig(max_model_calls=2), {})
    assert budget.reserve("T-1-run:verdict-1:call-1") is None
    assert budget.reserve("T-1-run:verdict-1:call-1") is None  # redelivered: no second call
    budget.record("model-a", 100, 10, key="T-1-run:verdict-1:call-1")
    budget.record("model-a", 100, 10, key="T-1-run:verdict-1:call-1")
    assert budget.read() == Spend(1, 100, 10, 0.0)
    assert budget.reserve("T-2-run:verdict-1:call-1") is None
    assert budget.reserve("T-3-run:verdict-1:call-1") == "batch budget spent: 2/2 model calls"
