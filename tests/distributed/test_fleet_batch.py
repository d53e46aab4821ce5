"""Batches across machines, end to end: ``orchestrator batch --backend celery`` queues the
tickets, real ``orchestrator worker`` processes on a real Redis run them from the shared
state dir, each ticket exactly once, through crashes and redelivery."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.errors import EXIT_NEEDS_HUMAN

from conftest import orchestrator_cmd, subprocess_env
from fleet_machines import (
    FleetWorkers,
    batch_cmd,
    counted,
    counts,
    write_fleet_config,
    write_tickets,
)
from redis_server import RedisServer

BATCH_DEADLINE_S = 120.0


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[list[FleetWorkers]]:
    fleets: list[FleetWorkers] = []
    yield fleets
    for fleet in fleets:
        fleet.stop_all()


def json_lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_twelve_tickets_over_two_workers_run_once_each_and_end_as_expected(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    stages = counted("a") + counted(
        "b", '[ "$ORCH_TICKET_ID" != T-03 ] && [ "$ORCH_TICKET_ID" != T-07 ]'
    )
    config = write_fleet_config(tmp_path, redis_server.url, namespace, stages, recovery=True)
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 12)
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one", concurrency=2)
    fleet.start("two", concurrency=2)
    done = subprocess.run(
        batch_cmd(config, tickets, "--json"), capture_output=True, text=True,
        env=subprocess_env(), timeout=BATCH_DEADLINE_S, cwd=tmp_path,
    )  # fmt: skip
    rows = json_lines(done.stdout)
    by_ticket = {row["ticket"]: row for row in rows if "ticket" in row}
    expected = {t: "completed" for t in ids} | {"T-03": "needs-human", "T-07": "needs-human"}
    assert {t: r["status"] for t, r in by_ticket.items()} == expected, done.stdout + done.stderr
    assert done.returncode == EXIT_NEEDS_HUMAN, done.stderr  # the worst outcome here
    state = tmp_path / "state"
    assert counts(state, "a") == {t: 1 for t in ids}
    assert counts(state, "b") == {t: 1 for t in ids}
    summary = rows[-1]["summary"]
    assert summary["tickets"] == 12  # type: ignore[index]
    verify = subprocess.run(
        orchestrator_cmd("--config", str(config), "ledger", "verify"),
        capture_output=True, text=True, env=subprocess_env(), timeout=60,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # Both machines took tickets.
    assert "run_ticket" in fleet.log("one") and "run_ticket" in fleet.log("two")
