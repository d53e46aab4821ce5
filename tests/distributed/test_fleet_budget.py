"""The fleet's budget: one atomic check-and-charge, never exceeded, once per key."""

from __future__ import annotations

import random
import threading

from orchestrator.distributed.client import CoordinationStore
from orchestrator.distributed.fleet_budget import Charged, FleetBudget, Refused
from orchestrator.domain.broker_url import BrokerUrl

from .conftest import Workers
from redis_server import RedisServer


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
