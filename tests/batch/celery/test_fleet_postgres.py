"""A fleet that shares no directory (issue 30): ``orchestrator worker`` processes, each
on a machine of its own (its own config copy, state dir, HOME and TMPDIR), and a batch
queued from a third, share only PostgreSQL (the state's record) and Redis (Celery's
broker). Each ticket runs once, through a lost worker, a paused one, a restarted or
cut database, and the batch's model budget holds across machines.

What the stages count is the test's instrument, not orchestrator state: each machine
counts in its own folder, and the test sums them."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.domain.runs import RunRecord

from conftest import COUNTS, bash_stage, orchestrator_cmd, subprocess_env, write_ticket
from support import SUPPORT
from support.file_watch import wait_for
from support.fleet_machines import (
    SeparateMachines,
    batch_cmd,
    counted,
    counts_over,
    machine_config,
    write_database_fleet_config,
)
from support.postgres_server import PostgresServer
from support.redis_server import RedisServer

BATCH_DEADLINE_S = 120.0
SCRIPTED_WORKER = SUPPORT / "scripted_worker.py"
# Fails the first time it runs for a ticket on a machine, passes after: a decision each.
FLAKY_BUILD = (
    "[routing]\nretry = 0.0\n"
    + counted("clone", "git init -q clone")
    + bash_stage(
        "build",
        f"f={COUNTS}/count-build-$ORCH_TICKET_ID; echo x >> $f; [ $(wc -l < $f) -ge 2 ]",
    )
)


# Every machine's, as documented: an approval signed on one is checked on another.
APPROVAL_KEY = {"ORCHESTRATOR_APPROVAL_KEY": secrets.token_hex(32)}


LEDGER_LINES = "SELECT line FROM ledger_rows ORDER BY seq"


def database_rows(url: str, query: str, *args: object) -> list[str]:
    """The first column of ``query``'s rows, read straight from the database."""
    import psycopg

    with psycopg.connect(url) as conn:
        return [str(row[0]) for row in conn.execute(query, args)]


def json_lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def queue_from(root: Path, config: Path, n: int) -> tuple[Path, Path, list[str]]:
    """The batch's machine: its config copy and ``n`` tickets (their repository a path
    every machine can reach, as a git server would be)."""
    folder = root / "batch"
    copy = machine_config(folder, config)
    ids = [f"T-{i:02d}" for i in range(n)]
    for ticket_id in ids:
        write_ticket(folder / "tickets", ticket_id, repository=str(root / "origin.git"))
    return copy, folder / "tickets", ids


def run_batch_from(config: Path, tickets: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    home = config.parent
    (home / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        batch_cmd(config, tickets, "--json", *extra), capture_output=True, text=True,
        env=subprocess_env(HOME=str(home), TMPDIR=str(home / "tmp"), **APPROVAL_KEY), cwd=home,
        timeout=BATCH_DEADLINE_S,
    )  # fmt: skip


def test_counts_over_machines_sum_each_tickets_runs(tmp_path: Path) -> None:
    for machine, lines in (("one", {"T-00": 1, "T-01": 2}), ("two", {"T-01": 1, "T-02": 1})):
        (tmp_path / machine / "counts").mkdir(parents=True)
        for ticket_id, n in lines.items():
            (tmp_path / machine / "counts" / f"count-b-{ticket_id}").write_text("x\n" * n)
    states = [tmp_path / "one" / "state", tmp_path / "two" / "state"]
    assert counts_over(states, "b") == {"T-00": 1, "T-01": 3, "T-02": 1}
    assert counts_over(states, "a") == {}


def scripted_fleet(
    tmp_path: Path, config: Path, calls: Path, machines: list[SeparateMachines]
) -> SeparateMachines:
    """Machines one and two, each a scripted-model worker (concurrency 2) that counts its
    model calls in ``calls``; every machine with the one approval key."""
    fleet = SeparateMachines(tmp_path, config, env=APPROVAL_KEY)
    machines.append(fleet)
    for name in ("one", "two"):
        fleet.start(name, argv=[sys.executable, str(SCRIPTED_WORKER), "{config}", str(calls), "2"])
    return fleet


@pytest.mark.slow
def test_tickets_over_two_machines_sharing_only_the_database_run_once_and_verify(
    pg_url: str,
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[SeparateMachines],
) -> None:
    config = write_database_fleet_config(
        tmp_path / "template", redis_server.url, namespace, pg_url, FLAKY_BUILD, recovery=True
    )
    batch_config, tickets, ids = queue_from(tmp_path, config, 8)
    calls = tmp_path / "model-calls.txt"
    fleet = scripted_fleet(tmp_path, config, calls, machines)
    for name in ("one", "two"):
        fleet.wait_ready(name)
    done = run_batch_from(batch_config, tickets)
    rows = json_lines(done.stdout)
    by_ticket = {row["ticket"]: row for row in rows if "ticket" in row}
    assert {t: r["status"] for t, r in by_ticket.items()} == {t: "completed" for t in ids}, (
        done.stdout + done.stderr + fleet.log("one") + fleet.log("two")
    )
    assert done.returncode == 0, done.stderr
    states = [fleet.state("one"), fleet.state("two")]
    assert counts_over(states, "clone") == {t: 1 for t in ids}
    assert counts_over(states, "build") == {t: 2 for t in ids}
    assert fleet.ran("one") >= 1 and fleet.ran("two") >= 1
    assert fleet.ran("one") + fleet.ran("two") == len(ids)
    verify = subprocess.run(
        orchestrator_cmd("--config", str(batch_config), "ledger", "verify"),
        capture_output=True, text=True, env=subprocess_env(**APPROVAL_KEY), timeout=60,
        cwd=batch_config.parent,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith(f"OK: {2 * len(ids)} entries"), verify.stdout
    # One chain, appended by both machines: a decision and its outcome per ticket, each
    # written by the machine that ran the ticket's failing build.
    entries = [json.loads(line) for line in database_rows(pg_url, LEDGER_LINES)]
    assert sorted((e["ticket"], e["kind"]) for e in entries) == sorted(
        (t, kind) for t in ids for kind in ("decision", "outcome")
    )
    for name in ("one", "two"):
        assert set(counts_over([fleet.state(name)], "build")) & {e["ticket"] for e in entries}
    assert len(calls.read_text().splitlines()) == len(ids)


def stall_on(machine: str, name: str, ticket_id: str, port: int) -> str:
    """A counted stage that, when it runs for ``ticket_id`` on ``machine`` (its counts
    folder is that machine's), tells the test its pid on a loopback port and then waits
    to be killed; anywhere else it just counts."""
    signal_test = f"echo started $$ > /dev/tcp/127.0.0.1/{port}; sleep 300"
    tail = (
        f'if [ "$ORCH_TICKET_ID" = {ticket_id} ]; then '
        f"case {COUNTS} in */machines/{machine}/counts) {signal_test};; esac; fi"
    )
    # Outside the sandbox: it talks to the test (the runner's containment is the same).
    return counted(name, tail, sandbox="none")


def hold_once(name: str, ticket_id: str, port: int, instrument: Path) -> str:
    """A counted stage that, the first time it runs for ``ticket_id`` on any machine (a
    directory made in the test's ``instrument`` says so), tells the test it started on a
    loopback port and waits for its go-ahead on the same connection."""
    talk = f'exec 3<>/dev/tcp/127.0.0.1/{port}; echo started $$ >&3; read -r go <&3; [ "$go" = go ]'
    tail = f'if [ "$ORCH_TICKET_ID" = {ticket_id} ] && mkdir {instrument}/held 2>/dev/null; then {talk}; fi'
    return counted(name, tail, sandbox="none")


def wait_started(listener: socket.socket) -> int:
    """The stage's pid, once it says it is running."""
    connection, _ = listener.accept()
    with connection:
        words = connection.makefile().readline().split()
    assert words[0] == "started", words
    return int(words[1])


def attempts_in_database(url: str, ticket_id: str) -> list[tuple[str, str]]:
    """The attempts of the ticket's latest run, as the database's ``runs`` row has it."""
    latest = database_rows(
        url,
        'SELECT record FROM runs WHERE ticket_id = %s ORDER BY created_at DESC, run_id COLLATE "C" LIMIT 1',
        ticket_id,
    )
    attempts = RunRecord.model_validate_json(latest[0]).attempts if latest else ()
    return [(a.stage, a.status.value) for a in attempts]


def run_rows(url: str, ticket_id: str) -> list[str]:
    return database_rows(
        url, "SELECT record FROM runs WHERE ticket_id = %s ORDER BY run_id", ticket_id
    )


def start_batch(batch_config: Path, tickets: Path) -> subprocess.Popen[str]:
    """``batch --backend celery --json`` from the batch's own directory, not waited for."""
    return subprocess.Popen(
        batch_cmd(batch_config, tickets, "--json"), stdout=subprocess.PIPE, text=True,
        env=subprocess_env(), cwd=batch_config.parent,
    )  # fmt: skip


def stalled_on_one(
    pg_url: str, broker_url: str, namespace: str, tmp_path: Path,
    machines: list[SeparateMachines], *, ticket: str, n: int, lease_s: float, after: str = "",
) -> tuple[SeparateMachines, subprocess.Popen[bytes], subprocess.Popen[str], list[str]]:  # fmt: skip
    """A batch of ``n`` tickets on machine one alone (short lease and visibility), once
    ``ticket``'s stage b runs there and stalls: the fleet, machine one's worker, the
    batch, the ticket ids. Stages: a, b, then ``after``."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        port = listener.getsockname()[1]
        stages = counted("a") + stall_on("one", "b", ticket, port) + after
        config = write_database_fleet_config(
            tmp_path / "template", broker_url, namespace, pg_url, stages,
            visibility_s=3.0, lease_s=lease_s,
        )  # fmt: skip
        batch_config, tickets, ids = queue_from(tmp_path, config, n)
        fleet = SeparateMachines(tmp_path, config)
        machines.append(fleet)
        first = fleet.start("one")
        batch = start_batch(batch_config, tickets)
        wait_started(listener)
    return fleet, first, batch, ids


@pytest.mark.slow
def test_a_machine_killed_mid_stage_has_its_ticket_finished_once_by_the_other(
    pg_url: str,
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[SeparateMachines],
) -> None:
    # A short visibility timeout and lease: the lost machine's ticket comes back soon.
    fleet, first, batch, ids = stalled_on_one(
        pg_url, redis_server.url, namespace, tmp_path, machines,
        ticket="T-01", n=3, lease_s=3.0, after=counted("c"),
    )  # fmt: skip
    os.killpg(first.pid, signal.SIGKILL)  # the machine is lost: worker and pool, no goodbye
    first.wait()
    fleet.start("two")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    rows = {row["ticket"]: row for row in json_lines(stdout) if "ticket" in row}
    assert {t: r["status"] for t, r in rows.items()} == {t: "completed" for t in ids}, (
        stdout + fleet.log("two")
    )
    assert batch.returncode == 0
    states = [fleet.state("one"), fleet.state("two")]
    assert counts_over(states, "a") == {t: 1 for t in ids}  # finished before the kill
    assert counts_over(states, "b") == {"T-00": 1, "T-01": 2, "T-02": 1}  # the killed one
    assert counts_over(states, "c") == {t: 1 for t in ids}
    assert counts_over([fleet.state("two")], "b")["T-01"] == 1  # finished by the other
    assert attempts_in_database(pg_url, "T-01") == [
        ("a", "finished"), ("b", "interrupted"), ("b", "finished"), ("c", "finished"),
    ]  # fmt: skip
    assert len(run_rows(pg_url, "T-01")) == 1  # resumed, not started again


@pytest.mark.slow
def test_a_machine_paused_past_its_lease_is_refused_by_the_database_when_it_wakes(
    pg_url: str,
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[SeparateMachines],
) -> None:
    fleet, first, batch, _ = stalled_on_one(
        pg_url, redis_server.url, namespace, tmp_path, machines, ticket="T-00", n=1, lease_s=2.0
    )
    # Paused once the database holds the running attempt.
    wait_for(
        lambda: attempts_in_database(pg_url, "T-00")[-1:] == [("b", "running")],
        fleet.state("one") / "runs",
        "the worker to save the running attempt",
        deadline_s=BATCH_DEADLINE_S,
    )
    os.killpg(first.pid, signal.SIGSTOP)  # a long pause: its lease runs out
    fleet.start("two")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    rows = [row for row in json_lines(stdout) if "ticket" in row]
    assert [(r["ticket"], r["status"], r["ran"]) for r in rows] == [("T-00", "completed", True)]
    taken_over = run_rows(pg_url, "T-00")
    os.killpg(first.pid, signal.SIGCONT)  # it wakes up, and finds its stage gone
    fleet.wait_in_log("one", "fenced out", BATCH_DEADLINE_S)
    assert "fenced out: ticket T-00" in fleet.log("one")
    assert run_rows(pg_url, "T-00") == taken_over  # not written over
    assert attempts_in_database(pg_url, "T-00") == [
        ("a", "finished"), ("b", "interrupted"), ("b", "finished"),
    ]  # fmt: skip
    states = [fleet.state("one"), fleet.state("two")]
    assert counts_over(states, "a") == {"T-00": 1}
    assert counts_over(states, "b") == {"T-00": 2}


def held_batch(
    pg_url: str, broker_url: str, namespace: str, tmp_path: Path, fleet_list: list[SeparateMachines],
    during: Callable[[], None], n: int = 4,
) -> tuple[SeparateMachines, list[str], str]:  # fmt: skip
    """A batch of ``n`` tickets over two machines, ``during()`` called while T-01's stage
    b holds (once, on whichever machine runs it); the batch's stdout once it ended."""
    instrument = tmp_path / "instrument"
    instrument.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        port = listener.getsockname()[1]
        stages = counted("a") + hold_once("b", "T-01", port, instrument) + counted("c")
        config = write_database_fleet_config(
            tmp_path / "template", broker_url, namespace, pg_url, stages,
            distributed="lost_task_check_s = 0.5\n",
        )  # fmt: skip
        batch_config, tickets, ids = queue_from(tmp_path, config, n)
        fleet = SeparateMachines(tmp_path, config)
        fleet_list.append(fleet)
        fleet.start("one", concurrency=2)
        fleet.start("two", concurrency=2)
        batch = start_batch(batch_config, tickets)
        connection, _ = listener.accept()
        with connection:
            assert connection.makefile().readline().startswith("started ")
            during()
            connection.sendall(b"go\n")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    assert batch.returncode == 0, stdout + fleet.log("one") + fleet.log("two")
    return fleet, ids, stdout


def assert_each_ran_once(pg_url: str, fleet: SeparateMachines, ids: list[str], stdout: str) -> None:
    rows = {row["ticket"]: row for row in json_lines(stdout) if "ticket" in row}
    assert {t: r["status"] for t, r in rows.items()} == {t: "completed" for t in ids}, stdout
    states = [fleet.state("one"), fleet.state("two")]
    for stage in ("a", "b", "c"):
        assert counts_over(states, stage) == {t: 1 for t in ids}, stage
    for ticket_id in ids:
        assert attempts_in_database(pg_url, ticket_id) == [
            ("a", "finished"), ("b", "finished"), ("c", "finished"),
        ], ticket_id  # fmt: skip
        assert len(run_rows(pg_url, ticket_id)) == 1


@pytest.mark.slow
def test_connections_cut_and_postgresql_restarted_mid_batch_lose_nothing(
    pg_url: str,
    postgres_server: PostgresServer,
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[SeparateMachines],
) -> None:
    """While one stage holds: every worker connection terminated (a dropped connection
    in the middle of whatever it was doing), then the server restarted. The workers wait
    and go on; every ticket completes, each stage once. (One fleet for both faults: a
    fleet's start is the costly part of these tests.)"""
    cut: list[int] = []

    def terminate_connections_then_restart() -> None:
        cut.extend(
            int(n)
            for n in database_rows(
                pg_url,
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'orchestrator' AND datname = current_database()",
            )
        )
        postgres_server.restart()

    fleet, ids, stdout = held_batch(
        pg_url, redis_server.url, namespace, tmp_path, machines, terminate_connections_then_restart
    )
    assert cut and cut[0] >= 1  # the heartbeats' connections at least
    assert_each_ran_once(pg_url, fleet, ids, stdout)


BUDGETED = (
    "[batch]\nmax_model_calls = 2\n[routing]\nretry = 0.0\n"
    + counted("clone", "git init -q clone")
    + bash_stage(
        "build",
        f"f={COUNTS}/count-build-$ORCH_TICKET_ID; echo x >> $f; [ $(wc -l < $f) -ge 2 ]",
    )
)


@pytest.mark.slow
def test_the_batch_budget_of_model_calls_is_exact_across_machines(
    pg_url: str,
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[SeparateMachines],
) -> None:
    config = write_database_fleet_config(
        tmp_path / "template", redis_server.url, namespace, pg_url, BUDGETED, recovery=True
    )
    batch_config, tickets, ids = queue_from(tmp_path, config, 5)
    calls = tmp_path / "model-calls.txt"
    fleet = scripted_fleet(tmp_path, config, calls, machines)
    done = run_batch_from(batch_config, tickets)
    rows = json_lines(done.stdout)
    statuses = sorted(str(r["status"]) for r in rows if "ticket" in r)
    assert statuses == ["completed"] * 2 + ["deferred"] * 3, done.stdout + done.stderr
    assert len(calls.read_text().splitlines()) == 2  # the whole fleet: two calls, no more
    assert rows[-1]["summary"]["model_calls"] == 2  # type: ignore[index]
    states = [fleet.state("one"), fleet.state("two")]
    assert counts_over(states, "clone") == {t: 1 for t in ids}
