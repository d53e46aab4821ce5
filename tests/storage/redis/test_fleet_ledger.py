"""The ledger as a fleet writes it: appends from several worker processes under the Redis
lock keep one verified chain; a fenced-out worker appends nothing."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.domain.runs import new_run_id
from orchestrator.storage.files import FileStorage
from orchestrator.storage.ledger import Ledger, LedgerRow, inputs_hash
from orchestrator.storage.protocols import DecisionLedger
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import Lease, TicketLeases, claim
from orchestrator.storage.redis.errors import FencedOut
from orchestrator.storage.redis.fleet_ledger import FleetLedger
from orchestrator.storage.redis.fleet_stores import FleetStorage
from orchestrator.storage.redis.ledger_lock import ledger_lock

from support.fleet_fixtures import Workers
from support.redis_server import RedisServer

NOW = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)


@pytest.mark.slow
def test_appends_from_several_workers_keep_one_verified_chain(
    redis_server: RedisServer, namespace: str, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "state" / "ledger.jsonl"
    processes, decisions = 4, 15
    started = workers.start_together(
        "ledger_writer.py",
        [[redis_server.url, namespace, str(path), str(decisions), f"W-{k}"] for k in range(processes)],
    )  # fmt: skip
    for process in started:
        assert workers.finish(process) == ["done"]
    ledger = Ledger(path)
    result = ledger.verify()
    assert (result.ok, result.count, result.reason) == (True, processes * decisions * 2, None)
    rows = list(ledger.rows())
    assert [row["seq"] for row in rows] == list(range(1, len(rows) + 1))
    assert Counter((row["ticket"], row["kind"]) for row in rows) == {
        (f"W-{k}", kind): decisions for k in range(processes) for kind in ("decision", "outcome")
    }


def test_a_fenced_out_worker_appends_no_decision(store: CoordinationStore, tmp_path: Path) -> None:
    leases = TicketLeases(store, ttl_s=30)
    old = leases.acquire("T-1")
    assert isinstance(old, Lease)
    store.client.delete(store.key("ticket", "T-1", "lease"))  # its lease ran out
    assert isinstance(leases.acquire("T-1"), Lease)
    path = tmp_path / "ledger.jsonl"
    ledger = FleetLedger(Ledger(path), ledger_lock(store), leases.fence(old))
    with pytest.raises(FencedOut, match="ticket T-1: this worker's fencing token is 1"):
        ledger.append(
            LedgerRow(
                kind="decision",
                decision_id="T-1-run:verdict-1",
                ticket="T-1",
                run="T-1-run",
                capability="recover-stage",
                inputs_hash=inputs_hash({}),
                model_version=None,
                prompt_version=None,
                source="model",
                decision={"verdict": {"action": "retry"}},
            )
        )
    assert not path.exists()
    assert store.client.get(store.key("lock", "ledger")) is None  # the lock was given back


def test_the_stores_of_a_claim_write_for_its_holder_and_refuse_after_a_takeover(
    store: CoordinationStore, tmp_path: Path
) -> None:
    storage = FileStorage(tmp_path / "state")
    leases = TicketLeases(store, ttl_s=30)
    with claim(leases, "T-1") as held:
        stores = FleetStorage(storage, held, store, "T-1")
        run_id = new_run_id("T-1", NOW)
        stores.budgets.charge("T-1", "diagnosis", f"{run_id}:verdict-1", run_id=run_id, at=NOW)
        row = decide(stores.ledger(), run_id, 1)

        store.client.delete(store.key("ticket", "T-1", "lease"))  # its lease ran out
        assert isinstance(leases.acquire("T-1"), Lease)  # and another worker took the ticket
        with pytest.raises(FencedOut):
            stores.budgets.charge("T-1", "retry", f"{run_id}:verdict-2", run_id=run_id, at=NOW)
        with pytest.raises(FencedOut):
            decide(stores.ledger(), run_id, 2)
        with pytest.raises(FencedOut):
            stores.ledger().append_outcome(row, "green")
    assert [c.key for c in storage.budgets.load("T-1").charges] == [f"{run_id}:verdict-1"]
    assert [r["decision_id"] for r in storage.ledger().rows()] == [f"{run_id}:verdict-1"]
    assert storage.ledger().verify().ok


def decide(ledger: DecisionLedger, run_id: str, n: int) -> dict[str, Any]:
    return ledger.append(
        LedgerRow(
            kind="decision",
            decision_id=f"{run_id}:verdict-{n}",
            ticket="T-1",
            run=run_id,
            capability="recover-stage",
            inputs_hash=inputs_hash({"n": n}),
            model_version=None,
            prompt_version=None,
            source="model",
            decision={"verdict": {"action": "retry"}},
        )
    )
