"""Batches across machines, end to end: ``orchestrator batch --backend celery`` queues the
tickets, real ``orchestrator worker`` processes on a real Redis run them from the shared
state dir, each ticket exactly once, through crashes and redelivery."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.app.fleet_key import FleetKey
from orchestrator.batch.celery.celery_app import celery_app, queue_name
from orchestrator.cli.main import main
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.errors import EXIT_LOCKED, EXIT_NEEDS_HUMAN, EXIT_USAGE
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import HeldElsewhere, TicketLeases
from orchestrator.storage.runs import RunStore

from conftest import COUNTS, bash_stage, orchestrator_cmd, subprocess_env
from support import SUPPORT
from support.file_watch import wait_for
from support.fleet_machines import (
    FleetWorkers,
    batch_cmd,
    counted,
    counts,
    hold_first,
    write_fleet_config,
    write_tickets,
)
from support.redis_server import RedisServer

BATCH_DEADLINE_S = 120.0


def attempt_saved(state: Path, ticket_id: str, stage: str) -> bool:
    """Whether the ticket's run record holds a running attempt of ``stage`` with its
    process group (what the runner saves right after it starts the stage)."""
    record = RunStore(state).latest_for_ticket(ticket_id)
    if record is None or not record.attempts:
        return False
    last = record.attempts[-1]
    return last.stage == stage and last.status == "running" and last.pgid is not None


def json_lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_twelve_tickets_over_two_workers_run_once_each_and_end_as_expected(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    stages = counted("a", "sleep 0.2") + counted(
        "b", '[ "$ORCH_TICKET_ID" != T-03 ] && [ "$ORCH_TICKET_ID" != T-07 ]'
    )
    config = write_fleet_config(tmp_path, redis_server.url, namespace, stages, recovery=True)
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 12)
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one", concurrency=2)
    fleet.start("two", concurrency=2)
    fleet.wait_ready("one")
    fleet.wait_ready("two")
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
    # Both machines took tickets, each once.
    assert fleet.ran("one") >= 1 and fleet.ran("two") >= 1
    assert fleet.ran("one") + fleet.ran("two") == 12


def stall_first(name: str, ticket_id: str, port: int) -> str:
    """A counted stage that, the first time it runs for ``ticket_id``, tells the test it is
    running (a line to a loopback port) and then waits to be killed."""
    signal_test = f"echo started $$ > /dev/tcp/127.0.0.1/{port}; sleep 300"
    tail = (
        f'if [ "$ORCH_TICKET_ID" = {ticket_id} ] && '
        f"[ $(wc -l < {COUNTS}/count-{name}-$ORCH_TICKET_ID) = 1 ]; then {signal_test}; fi"
    )
    # Outside the sandbox: it talks to the test, and the pid it sends must be the host's
    # (the test checks that process is ended; the runner's containment is the same).
    return counted(name, tail, sandbox="none")


def wait_started(listener: socket.socket) -> int:
    """The stage's pid, once it says it is running (no sleeping)."""
    connection, _ = listener.accept()
    with connection:
        words = connection.makefile().readline().split()
    assert words[0] == "started", words
    return int(words[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.slow
def test_a_worker_killed_mid_ticket_has_it_redelivered_and_finished_once(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        stages = counted("a") + stall_first("b", "T-01", listener.getsockname()[1]) + counted("c")
        # A short visibility timeout and lease: the lost worker's ticket comes back soon.
        config = write_fleet_config(
            tmp_path, redis_server.url, namespace, stages, visibility_s=3.0, lease_s=3.0
        )
        tickets = tmp_path / "tickets"
        ids = write_tickets(tickets, 3)
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        first = fleet.start("one")
        batch = subprocess.Popen(
            batch_cmd(config, tickets, "--json"), stdout=subprocess.PIPE, text=True,
            env=subprocess_env(), cwd=tmp_path,
        )  # fmt: skip
        stage_pid = wait_started(listener)
    os.killpg(first.pid, signal.SIGKILL)  # the machine is lost: worker and pool, no goodbye
    first.wait()
    fleet.start("two")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    rows = {row["ticket"]: row for row in json_lines(stdout) if "ticket" in row}
    assert {t: r["status"] for t, r in rows.items()} == {t: "completed" for t in ids}, stdout
    assert batch.returncode == 0
    state = tmp_path / "state"
    assert counts(state, "a") == {t: 1 for t in ids}  # finished before the kill: not again
    assert counts(state, "b") == {"T-00": 1, "T-01": 2, "T-02": 1}  # the killed one, again
    assert counts(state, "c") == {t: 1 for t in ids}
    assert not alive(stage_pid)  # what the lost worker left running was killed
    record = RunStore(state).latest_for_ticket("T-01")
    assert record is not None
    statuses = [(a.stage, a.status.value) for a in record.attempts]
    assert statuses == [
        ("a", "finished"), ("b", "interrupted"), ("b", "finished"), ("c", "finished"),
    ]  # fmt: skip
    charges = BudgetStore(state).load("T-01").charges
    assert len({(c.kind, c.key) for c in charges}) == len(charges) == 0  # nothing charged


@pytest.mark.slow
@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "worker-only"])
def test_sigterm_stops_the_workers_stage_saves_the_run_and_requeues_it(
    redis_server: RedisServer,
    namespace: str,
    fleet_key: FleetKey,
    tmp_path: Path,
    machines: list[FleetWorkers],
    whole_group: bool,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        stages = counted("a") + stall_first("b", "T-00", listener.getsockname()[1])
        config = write_fleet_config(tmp_path, redis_server.url, namespace, stages, lease_s=3.0)
        tickets = tmp_path / "tickets"
        write_tickets(tickets, 1)
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        first = fleet.start("one")
        queued = subprocess.run(
            batch_cmd(config, tickets, "--no-wait", "--json"), capture_output=True, text=True,
            env=subprocess_env(), cwd=tmp_path, timeout=60,
        )  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        [row] = [row for row in json_lines(queued.stdout) if "ticket" in row]
        task_id = str(row["detail"]).removeprefix("task ")
        stage_pid = wait_started(listener)
    if whole_group:
        os.killpg(first.pid, signal.SIGTERM)  # as systemd or a container stop does
    else:
        os.kill(first.pid, signal.SIGTERM)  # `kill PID`: the worker forwards it
    assert first.wait(timeout=60) == 0, fleet.log("one")
    assert not alive(stage_pid)  # stopped through the runner, not left behind
    state = tmp_path / "state"
    record = RunStore(state).latest_for_ticket("T-00")
    assert record is not None and record.state.value == "running"
    assert [a.status.value for a in record.attempts] == ["finished", "interrupted"]
    assert "requeued" in fleet.log("one")
    fleet.start("two")  # takes the requeued ticket and resumes the run
    app = celery_app(BrokerUrl(redis_server.url), namespace=namespace, fleet=fleet_key)
    answer = app.AsyncResult(task_id).get(timeout=BATCH_DEADLINE_S)
    assert (answer["ticket"], answer["status"], answer["ran"]) == ("T-00", "completed", True)
    assert answer["run_id"] == record.run_id  # the same run, resumed
    assert counts(state, "a") == {"T-00": 1}
    assert counts(state, "b") == {"T-00": 2}


@pytest.mark.slow
def test_no_reachable_broker_fails_the_preflight_and_queues_nothing(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens here once the probe is closed
    down = f"redis://:Hunter2-secret@127.0.0.1:{closed}/0"
    config = write_fleet_config(tmp_path, down, namespace, counted("a"))
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 2)
    failed = subprocess.run(
        batch_cmd(config, tickets), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=60,
    )  # fmt: skip
    # The preflight (issue 27): a batch that cannot queue anything exits 2 naming the fix.
    assert failed.returncode == EXIT_USAGE
    assert failed.stdout == ""
    [broker] = [line for line in failed.stderr.splitlines() if "✗ broker:" in line]
    assert f"127.0.0.1:{closed}" in broker and "fix: start Redis there" in broker, failed.stderr
    assert "Hunter2" not in failed.stderr
    # Without it, the old path: one line, a temporary failure.
    skipped = subprocess.run(
        [*batch_cmd(config, tickets), "--no-preflight"], capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert skipped.returncode == EXIT_LOCKED
    lines = skipped.stderr.splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{closed}" in lines[0], skipped.stderr
    assert "Hunter2" not in skipped.stderr
    # The same batch on a broker that answers queues each ticket once, however often
    # cron starts it while no worker runs.
    url = {"ORCHESTRATOR_BROKER_URL": redis_server.url}
    command = batch_cmd(config, tickets, "--no-wait", "--json")
    outputs = [
        subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=subprocess_env(**url),
            cwd=tmp_path,
            timeout=60,
        )
        for _ in range(2)
    ]
    assert [o.returncode for o in outputs] == [0, 0], [o.stderr for o in outputs]
    first, second = ([r["status"] for r in json_lines(o.stdout) if "ticket" in r] for o in outputs)
    assert first == ["queued", "queued"] and second == ["already queued", "already queued"]
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    try:
        pending = store.call(
            lambda client: client.llen(f"{namespace}:celery:{queue_name(namespace)}")
        )
    finally:
        store.close()
    assert pending == 2


def flaky_check(name: str, fails: int) -> str:
    """A stage whose check cannot reach a host its first ``fails`` runs (the network's
    fault, not the code's), counted in ``count-<name>-<ticket>``."""
    count = f"{COUNTS}/count-{name}-$ORCH_TICKET_ID"
    unreachable = (
        "echo \"fatal: unable to access 'https://registry.invalid/x.git/': "
        'Could not resolve host: registry.invalid" >&2; exit 128'
    )
    script = f"echo x >> {count}; if [ $(wc -l < {count}) -le {fails} ]; then {unreachable}; fi"
    return (
        f'[[stages]]\nname = "{name}"\ncwd = "run"\nwritable = ["{COUNTS}"]\n'
        f"[[stages.checks]]\nname = \"fetch\"\ncommand = ['bash', '-c', '''{script}''']\n\n"
    )


@pytest.mark.slow
def test_an_infra_back_off_is_a_celery_retry_not_a_sleeping_worker(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    header = (
        "[recovery]\ninfra_backoff_s = 1.0\nmax_infra_retries_per_ticket = 2\n"
        '[routing]\nretry = 0.0\n"abandon-human" = 0.0\n'
    )
    config = write_fleet_config(
        tmp_path, redis_server.url, namespace, header + counted("a") + flaky_check("b", 1),
        recovery=True,
    )  # fmt: skip
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 1)
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    done = subprocess.run(
        batch_cmd(config, tickets, "--json"), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=BATCH_DEADLINE_S,
    )  # fmt: skip
    rows = [row for row in json_lines(done.stdout) if "ticket" in row]
    assert [(r["ticket"], r["status"]) for r in rows] == [("T-00", "completed")], (
        done.stdout + done.stderr + fleet.log("one")
    )
    state = tmp_path / "state"
    assert counts(state, "a") == {"T-00": 1}
    assert counts(state, "b") == {"T-00": 2}
    # The back-off was a retry of the task (its log says so), and charged once.
    assert "Retry in 1" in fleet.log("one"), fleet.log("one")
    charges = BudgetStore(state).load("T-00").charges
    assert [c.kind for c in charges] == ["infra-retry"]


@pytest.mark.slow
def test_a_ticket_claimed_by_another_live_worker_is_retried_later_never_run_twice(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config = write_fleet_config(tmp_path, redis_server.url, namespace, counted("a"), lease_s=1.0)
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 1)
    # Another worker (this test) holds the ticket until the fleet's worker has been
    # refused it at least once, then lets go: held for a time instead, a busy machine
    # could start the worker only after the lease ran out, and nothing would be refused.
    leases = TicketLeases(store, ttl_s=float(BATCH_DEADLINE_S))
    held = leases.acquire("T-00")
    assert not isinstance(held, HeldElsewhere)
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    batch = subprocess.Popen(
        batch_cmd(config, tickets, "--json"), stdout=subprocess.PIPE, text=True,
        env=subprocess_env(), cwd=tmp_path,
    )  # fmt: skip
    refused = f"ticket T-00 is claimed by another worker ({held.holder}); retrying in 1s"
    try:
        fleet.wait_in_log("one", refused, deadline_s=BATCH_DEADLINE_S)
        assert counts(tmp_path / "state", "a") == {}  # refused: nothing of it ran
        assert leases.release(held)
        stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.communicate()
    rows = [row for row in json_lines(stdout) if "ticket" in row]
    assert [(r["ticket"], r["status"]) for r in rows] == [("T-00", "completed")], stdout
    assert counts(tmp_path / "state", "a") == {"T-00": 1}


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_cannot_write_the_run_once_another_took_it(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        stages = counted("a") + stall_first("b", "T-00", listener.getsockname()[1])
        config = write_fleet_config(
            tmp_path, redis_server.url, namespace, stages, visibility_s=3.0, lease_s=2.0
        )
        tickets = tmp_path / "tickets"
        write_tickets(tickets, 1)
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        first = fleet.start("one")
        batch = subprocess.Popen(
            batch_cmd(config, tickets, "--json"), stdout=subprocess.PIPE, text=True,
            env=subprocess_env(), cwd=tmp_path,
        )  # fmt: skip
        wait_started(listener)
    # Paused once it has saved the running attempt (a pause inside that write is the
    # fence's narrower case: test_coordination's takeover between the check and rename).
    state = tmp_path / "state"
    wait_for(
        lambda: attempt_saved(state, "T-00", "b"),
        state / "runs",
        "the worker to save the running attempt",
        deadline_s=BATCH_DEADLINE_S,
    )
    os.killpg(first.pid, signal.SIGSTOP)  # a long pause: its lease runs out
    fleet.start("two")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    rows = [row for row in json_lines(stdout) if "ticket" in row]
    assert [(r["ticket"], r["status"], r["ran"]) for r in rows] == [("T-00", "completed", True)]
    taken_over = RunStore(state).latest_for_ticket("T-00")
    os.killpg(first.pid, signal.SIGCONT)  # it wakes up, and finds its stage gone
    fleet.wait_in_log("one", "fenced out", BATCH_DEADLINE_S)
    assert "fenced out: ticket T-00" in fleet.log("one")
    assert RunStore(state).latest_for_ticket("T-00") == taken_over  # not written over
    assert counts(state, "a") == {"T-00": 1}
    assert counts(state, "b") == {"T-00": 2}


@pytest.mark.slow
def test_redis_restarted_in_the_middle_of_a_batch_the_workers_reconnect_and_it_completes(
    redis_servers: Callable[..., RedisServer],
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    server = redis_servers(persist=True)  # appendonly: the queue and the leases survive
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(BATCH_DEADLINE_S)
        stages = counted("a") + hold_first("b", "T-01", listener.getsockname()[1])
        # A message a worker was taking as Redis went down can be lost (kombu pops it
        # before it records it): the batch looks for it every half second, not every 30.
        config = write_fleet_config(
            tmp_path, server.url, namespace, stages, distributed="lost_task_check_s = 0.5\n"
        )
        tickets = tmp_path / "tickets"
        ids = write_tickets(tickets, 4)
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        fleet.start("one")
        fleet.start("two")
        batch = subprocess.Popen(
            batch_cmd(config, tickets, "--json"), stdout=subprocess.PIPE, text=True,
            env=subprocess_env(), cwd=tmp_path,
        )  # fmt: skip
        connection, _ = listener.accept()
        with connection:
            assert connection.makefile().readline().startswith("started ")
            server.restart()  # in the middle of T-01's stage b
            connection.sendall(b"go\n")
    stdout, _ = batch.communicate(timeout=BATCH_DEADLINE_S)
    rows = {row["ticket"]: row for row in json_lines(stdout) if "ticket" in row}
    assert {t: r["status"] for t, r in rows.items()} == {t: "completed" for t in ids}, stdout
    assert batch.returncode == 0
    state = tmp_path / "state"
    assert counts(state, "a") == {t: 1 for t in ids}
    assert counts(state, "b") == {t: 1 for t in ids}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--no-wait"], "batch: --no-wait needs --backend celery"),
        (["--backend", "celery", "--jobs", "2"], "--jobs is the workers' --concurrency"),
    ],
)
def test_options_of_the_other_backend_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    config = write_fleet_config(tmp_path, "redis://127.0.0.1:1/0", "ns", counted("a"))
    write_tickets(tmp_path / "tickets", 1)
    code = main(["--config", str(config), "batch", "--tickets", str(tmp_path / "tickets"), *args])
    assert code == EXIT_USAGE
    assert said in capsys.readouterr().err
    assert not (tmp_path / "state" / "runs").exists()


BUDGETED = (
    "[batch]\nmax_model_calls = 2\n[routing]\nretry = 0.0\n"
    + counted("clone", "git init -q clone")
    # Fails the first time it runs for each ticket, passes after.
    + bash_stage(
        "build",
        f"f={COUNTS}/count-build-$ORCH_TICKET_ID; echo x >> $f; [ $(wc -l < $f) -ge 2 ]",
    )
)


@pytest.mark.slow
def test_a_batch_budget_of_model_calls_is_never_exceeded_across_workers(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    config = write_fleet_config(tmp_path, redis_server.url, namespace, BUDGETED, recovery=True)
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 4)
    calls = tmp_path / "model-calls.txt"
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    script = [sys.executable, str(SUPPORT / "scripted_worker.py")]
    for name in ("one", "two"):
        fleet.start(name, argv=[*script, str(config), str(calls)])
    done = subprocess.run(
        batch_cmd(config, tickets, "--json"), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=BATCH_DEADLINE_S,
    )  # fmt: skip
    rows = json_lines(done.stdout)
    statuses = sorted(str(r["status"]) for r in rows if "ticket" in r)
    assert statuses == ["completed", "completed", "deferred", "deferred"], done.stdout
    assert len(calls.read_text().splitlines()) == 2  # the whole fleet: two calls, no more
    assert rows[-1]["summary"]["model_calls"] == 2  # type: ignore[index]
    state = tmp_path / "state"
    assert counts(state, "clone") == {t: 1 for t in ids}
    for ticket_id in ids:  # a deferred ticket was charged nothing
        budget = BudgetStore(state).load(ticket_id)
        assert budget.spent("diagnosis") == budget.spent("retry") <= 1


@pytest.mark.slow
def test_a_worker_without_a_reachable_broker_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    down = f"redis://:Hunter2-secret@127.0.0.1:{closed}/0"
    config = write_fleet_config(tmp_path, down, "ns", counted("a"))
    failed = subprocess.run(
        orchestrator_cmd("--config", str(config), "worker"), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert failed.returncode == EXIT_LOCKED
    [line] = failed.stderr.splitlines()
    assert line.startswith(f"coordination store unavailable: redis://:***@127.0.0.1:{closed}/0")
    assert "Hunter2" not in failed.stdout + failed.stderr
