"""The ledger as a fleet writes it: appends from several worker processes under the Redis
lock keep one verified chain; a fenced-out worker appends nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from orchestrator.distributed.client import CoordinationStore
from orchestrator.distributed.coordination import Lease, TicketLeases
from orchestrator.distributed.errors import FencedOut
from orchestrator.distributed.fleet_ledger import FleetLedger
from orchestrator.distributed.ledger_lock import ledger_lock
from orchestrator.storage.ledger import Ledger, inputs_hash

from .conftest import Workers
from redis_server import RedisServer


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
    assert not path.exists()
    assert store.client.get(store.key("lock", "ledger")) is None  # the lock was given back
