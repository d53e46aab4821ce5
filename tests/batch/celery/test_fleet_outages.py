"""A waiting batch through what Redis does to it: restarted while the batch waits, gone
longer than the batch will wait, and a message the broker lost on its way to a worker
(kombu's Redis transport takes it off the queue before it records it as unacknowledged,
so a worker whose connection drops in between loses it). None of them may wedge the
batch or run a ticket twice."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from orchestrator.app.fleet_key import FleetKey
from orchestrator.batch.celery.backend import BATCH_REDIS_PATIENCE_S
from orchestrator.batch.celery.celery_app import broker_keys, celery_app, queue_name
from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.batch.celery.task_results import (
    TaskResults,
    WaitPolicy,
    message_place,
    pause_after,
)
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.errors import EXIT_LOCKED
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.errors import CoordinationUnavailable

from conftest import subprocess_env
from support.fleet_machines import (
    FleetWorkers,
    batch_cmd,
    counted,
    counts,
    hold_first,
    run_batch,
    write_fleet_config,
    write_tickets,
)
from support.lossy_proxy import LossyProxy
from support.redis_server import RedisServer

DEADLINE_S = 90.0
QUICK = "lost_task_check_s = 0.3\n"


def statuses(stdout: str) -> dict[str, str]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {str(row["ticket"]): str(row["status"]) for row in rows if "ticket" in row}


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll Redis for what another process did (there is nothing else to wait on)."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def start_batch(config: Path, tickets: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        batch_cmd(config, tickets, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=subprocess_env(), cwd=cwd,
    )  # fmt: skip


def test_the_pause_between_tries_doubles_up_to_its_cap() -> None:
    assert [pause_after(n) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert pause_after(10_000) == 5.0


@pytest.mark.slow
def test_a_message_is_in_sight_while_queued_and_while_a_worker_holds_it(
    redis_server: RedisServer,
    namespace: str,
    fleet_key: FleetKey,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    # Pins where kombu keeps messages (the queue's list, the unacknowledged hash): a kombu
    # that moved them would make every pending task look lost.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(DEADLINE_S)
        stages = hold_first("a", "T-00", listener.getsockname()[1])
        config = write_fleet_config(tmp_path, redis_server.url, namespace, stages)
        tickets = tmp_path / "tickets"
        write_tickets(tickets, 1)
        queued = run_batch(config, tickets, "--json", "--no-wait", timeout_s=DEADLINE_S)
        row = json.loads(queued.stdout.splitlines()[0])
        assert (row["ticket"], row["status"]) == ("T-00", "queued"), queued.stdout
        task_id = str(row["detail"]).removeprefix("task ")
        keys = broker_keys(namespace)
        assert store.client.llen(keys.queues[0]) == 1
        assert message_place(store, keys, task_id) == "queued"
        assert message_place(store, keys, "0b7c6f3e-0000-4000-8000-000000000000") is None
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        fleet.start("one")
        connection, _ = listener.accept()  # the stage runs: the worker holds the message
        with connection:
            assert connection.makefile().readline().startswith("started ")
            assert store.client.llen(keys.queues[0]) == 0
            assert store.client.hlen(keys.unacked) == 1
            assert message_place(store, keys, task_id) == "held"
            connection.sendall(b"go\n")
    app = celery_app(BrokerUrl(redis_server.url), namespace=namespace, fleet=fleet_key)
    assert app.AsyncResult(task_id).get(timeout=DEADLINE_S)["status"] == "completed"
    until(lambda: store.client.hlen(keys.unacked) == 0, "the message to be acknowledged")
    assert message_place(store, keys, task_id) is None


@pytest.mark.slow
def test_a_message_the_broker_lost_is_queued_again_and_its_ticket_runs_once(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config = write_fleet_config(
        tmp_path, redis_server.url, namespace, counted("a"), distributed=QUICK
    )
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 3)
    keys = broker_keys(namespace)
    batch = start_batch(config, tickets, tmp_path)
    until(lambda: store.client.llen(keys.queues[0]) == 3, "the batch to queue its tickets")
    # The next message a worker would take, taken off the queue and never recorded: what a
    # worker's BRPOP does when its connection drops before it writes the message down.
    lost = json.loads(str(store.client.rpop(keys.queues[0])))
    lost_id, lost_ticket = lost["headers"]["id"], lost["headers"]["argsrepr"].split("'")[1]
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    stdout, stderr = batch.communicate(timeout=DEADLINE_S)
    assert statuses(stdout) == {t: "completed" for t in ids}, stdout + stderr
    assert batch.returncode == 0, stderr
    assert counts(tmp_path / "state", "a") == {t: 1 for t in ids}
    note = f"ticket {lost_ticket}: task {lost_id} was neither queued nor with a worker"
    assert note in stderr, stderr
    assert stderr.count("queued again") == 1, stderr  # only the lost one


@pytest.mark.slow
def test_redis_restarted_while_the_batch_waits_it_completes(
    redis_servers: Callable[..., RedisServer],
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    server = redis_servers(persist=True)
    config = write_fleet_config(tmp_path, server.url, namespace, counted("a"), distributed=QUICK)
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 2)
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    keys = broker_keys(namespace)
    batch = start_batch(config, tickets, tmp_path)
    until(lambda: store.client.llen(keys.queues[0]) == 2, "the batch to queue its tickets")
    server.restart()  # the batch's connections are cut while it waits
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    stdout, stderr = batch.communicate(timeout=DEADLINE_S)
    assert statuses(stdout) == {t: "completed" for t in ids}, stdout + stderr
    assert batch.returncode == 0 and "internal error" not in stderr, stderr
    assert counts(tmp_path / "state", "a") == {t: 1 for t in ids}
    store.close()


@pytest.mark.slow
def test_redis_gone_longer_than_the_batch_waits_is_exit_75_and_the_same_batch_collects(
    redis_servers: Callable[..., RedisServer],
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    server = redis_servers(persist=True, password="s3cret-Redis-pw")
    config = write_fleet_config(
        tmp_path, server.url, namespace, counted("a"), distributed=QUICK + "outage_wait_s = 1\n"
    )
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 2)
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    keys = broker_keys(namespace)
    batch = start_batch(config, tickets, tmp_path)
    until(lambda: store.client.llen(keys.queues[0]) == 2, "the batch to queue its tickets")
    server.stop()
    stdout, stderr = batch.communicate(timeout=DEADLINE_S)
    assert batch.returncode == EXIT_LOCKED, stdout + stderr
    assert f"coordination store unavailable: redis://:***@127.0.0.1:{server.port}/0: " in stderr
    assert "run the same batch again to collect the answers" in stderr, stderr
    assert "internal error" not in stderr and "s3cret-Redis-pw" not in stderr + stdout
    # Redis back, a worker up: the same batch again waits for the tasks the first queued
    # (they are still marked queued) and prints their answers; each ticket ran once.
    server.start()
    store.close()
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    again = start_batch(config, tickets, tmp_path)
    # The worker starts once the batch waits (subscribed to a task's answer): before, it
    # could finish both tickets first, and the batch would rightly call them
    # already-completed.
    until(lambda: bool(store.client.pubsub_channels("*celery-task-meta-*")), "the batch to wait")
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    stdout, stderr = again.communicate(timeout=DEADLINE_S)
    assert statuses(stdout) == {t: "completed" for t in ids}, stdout + stderr
    assert again.returncode == 0
    assert counts(tmp_path / "state", "a") == {t: 1 for t in ids}
    store.close()


@pytest.mark.slow
def test_cron_batches_that_do_not_wait_send_a_lost_task_again_and_it_runs_once(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config = write_fleet_config(
        tmp_path, redis_server.url, namespace, counted("a"), distributed=QUICK
    )
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 2)
    keys = broker_keys(namespace)

    def cron() -> subprocess.CompletedProcess[str]:
        return run_batch(config, tickets, "--json", "--no-wait", timeout_s=DEADLINE_S)

    first = cron()
    assert statuses(first.stdout) == {"T-00": "queued", "T-01": "queued"}, first.stderr
    lost = json.loads(str(store.client.rpop(keys.queues[0])))  # no worker will ever see it
    lost_id, lost_ticket = lost["headers"]["id"], lost["headers"]["argsrepr"].split("'")[1]
    second = cron()  # both still marked queued; one of them is nowhere
    assert statuses(second.stdout) == {"T-00": "already queued", "T-01": "already queued"}
    assert f"ticket {lost_ticket}: task {lost_id} was neither queued" in second.stderr
    assert second.stderr.count("queued again") == 1, second.stderr
    assert store.client.llen(keys.queues[0]) == 2  # sent again, once
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    until(lambda: fleet.ran("one") == 2, "the worker to run both tickets")
    assert counts(tmp_path / "state", "a") == {"T-00": 1, "T-01": 1}
    third = cron()
    assert statuses(third.stdout) == {"T-00": "already-completed", "T-01": "already-completed"}
    assert "queued again" not in third.stderr


@pytest.mark.slow
def test_a_batch_killed_between_marking_a_ticket_and_queueing_it_wedges_nothing(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    # What a batch killed -9 right after marking T-00 queued leaves: the mark, no message.
    config = write_fleet_config(
        tmp_path, redis_server.url, namespace, counted("a"), distributed=QUICK
    )
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 1)
    orphan = "5f0c2b9e-1d1e-4c57-9a51-000000000001"
    assert Enqueued(store).mark("T-00", orphan, keep_s=3600) is None
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    done = run_batch(config, tickets, "--json", timeout_s=DEADLINE_S)
    assert statuses(done.stdout) == {"T-00": "completed"}, done.stdout + done.stderr
    assert f"ticket T-00: task {orphan} was neither queued nor with a worker" in done.stderr
    assert counts(tmp_path / "state", "a") == {"T-00": 1}
    assert Enqueued(store).current("T-00") is None  # the task ended its own mark


@pytest.mark.slow
def test_a_task_sent_to_a_broker_that_is_gone_is_a_clear_error_naming_it_masked(
    redis_servers: Callable[..., RedisServer], namespace: str, fleet_key: FleetKey
) -> None:
    server = redis_servers(password="s3cret-Redis-pw")
    url = BrokerUrl(server.url)
    store = CoordinationStore(url, namespace=namespace)
    answers = TaskResults(
        partial(
            celery_app, url, namespace=namespace, fleet=fleet_key, patience_s=BATCH_REDIS_PATIENCE_S
        ),
        store, broker_keys(namespace),
        WaitPolicy(outage_s=1.0, check_s=0.3),
    )  # fmt: skip
    server.stop()
    with pytest.raises(CoordinationUnavailable) as gone:
        answers.send("orchestrator.run_ticket", ["T-00"], "task-0", "q")
    message = str(gone.value)
    assert message.startswith(
        f"coordination store unavailable: redis://:***@127.0.0.1:{server.port}/0: "
    )
    assert "s3cret-Redis-pw" not in message
    store.close()


def worker_behind(
    proxy: LossyProxy, redis_server: RedisServer, namespace: str, root: Path,
    machines: list[FleetWorkers],
) -> tuple[Path, Path, FleetWorkers]:  # fmt: skip
    """One ticket and one ready worker that reaches Redis through ``proxy``; the batch
    (its config, returned with the tickets) reaches it directly. Same state dir."""
    config = write_fleet_config(root, redis_server.url, namespace, counted("a"), distributed=QUICK)
    on_proxy = root / "workers.toml"
    on_proxy.write_text(config.read_text().replace(redis_server.url, proxy.url()))
    tickets = root / "tickets"
    write_tickets(tickets, 1)
    fleet = FleetWorkers(root, on_proxy)
    machines.append(fleet)
    fleet.start("one")
    fleet.wait_ready("one")
    return config, tickets, fleet


@pytest.mark.slow
def test_a_task_starting_as_redis_goes_away_runs_once_it_is_back(
    redis_server: RedisServer,
    proxy: LossyProxy,
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config, tickets, fleet = worker_behind(proxy, redis_server, namespace, tmp_path, machines)
    # A worker's first write for a task is its STARTED state (a read of the task's state,
    # then a write): Redis goes away right as it runs, and comes back after turning away
    # the client's reconnection.
    proxy.lose_answer_to(b"celery-task-meta-", refused=1)
    done = run_batch(config, tickets, "--json", timeout_s=DEADLINE_S)
    assert proxy.lost.is_set()
    assert statuses(done.stdout) == {"T-00": "completed"}, done.stdout + fleet.log("one")
    assert counts(tmp_path / "state", "a") == {"T-00": 1}


@pytest.mark.slow
def test_a_batch_with_no_worker_running_says_so_once_and_completes_when_one_starts(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    config = write_fleet_config(
        tmp_path, redis_server.url, namespace, counted("a"), distributed=QUICK
    )
    tickets = tmp_path / "tickets"
    write_tickets(tickets, 1)
    batch = start_batch(config, tickets, tmp_path)
    assert batch.stderr is not None
    said = ""
    while "still waits in the queue" not in said:  # 10 looks 0.3 s apart, then one line
        said = batch.stderr.readline()
        assert said, "the batch ended without saying no worker took its task"
    assert "after 3 s: no worker has taken it (is an `orchestrator worker` running" in said
    assert "ticket T-00: task " in said
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    stdout, stderr = batch.communicate(timeout=DEADLINE_S)
    assert statuses(stdout) == {"T-00": "completed"}, stdout + stderr
    assert "still waits" not in stderr  # said once


@pytest.mark.slow
def test_redis_restarted_without_persistence_mid_ticket_the_batch_queues_it_again(
    redis_servers: Callable[..., RedisServer],
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    # Everything in Redis is gone: the queue, the task's state, the lease and its fence.
    # The worker's next write finds no record of its lease and stops (the safe side); the
    # waiting batch finds its task nowhere, sends it again, and the ticket resumes.
    server = redis_servers()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(DEADLINE_S)
        stages = counted("a") + hold_first("b", "T-00", listener.getsockname()[1])
        config = write_fleet_config(tmp_path, server.url, namespace, stages, distributed=QUICK)
        tickets = tmp_path / "tickets"
        write_tickets(tickets, 1)
        fleet = FleetWorkers(tmp_path, config)
        machines.append(fleet)
        fleet.start("one")
        batch = start_batch(config, tickets, tmp_path)
        connection, _ = listener.accept()
        with connection:
            assert connection.makefile().readline().startswith("started ")
            server.restart()  # no appendonly: it comes back empty
            connection.sendall(b"go\n")
    stdout, stderr = batch.communicate(timeout=DEADLINE_S)
    assert statuses(stdout) == {"T-00": "completed"}, stdout + stderr + fleet.log("one")
    assert "was neither queued nor with a worker" in stderr, stderr
    assert "fenced out: ticket T-00" in fleet.log("one")
    state = tmp_path / "state"
    assert counts(state, "a") == {"T-00": 1}  # finished stages are not run again
    assert counts(state, "b") == {"T-00": 2}  # the one the restart cut short is


@pytest.mark.slow
def test_a_task_that_cannot_reach_redis_is_retried_even_when_its_retry_must_wait_for_it(
    redis_server: RedisServer,
    proxy: LossyProxy,
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config, tickets, fleet = worker_behind(proxy, redis_server, namespace, tmp_path, machines)
    # Redis goes away for 3 s as the worker claims the ticket: the task cannot reach it
    # ("retrying in 5s"), and the retry's own message must wait for Redis too.
    proxy.lose_answer_to(b"ticket:T-00:lease", down_s=3.0)
    done = run_batch(config, tickets, "--json", timeout_s=DEADLINE_S)
    assert proxy.lost.is_set()
    assert statuses(done.stdout) == {"T-00": "completed"}, done.stdout + fleet.log("one")
    assert "T-00: coordination store unavailable" in fleet.log("one")
    assert counts(tmp_path / "state", "a") == {"T-00": 1}


@pytest.mark.parametrize("state", ["PENDING", "RETRY"])
def test_a_task_no_worker_runs_whose_message_is_nowhere_is_lost_and_only_then(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    state: str,
    fleet_key: FleetKey,
) -> None:
    # A real Celery app on a real Redis, no worker: the task's state and its message are
    # set by hand to each case a batch can find.
    url = BrokerUrl(redis_server.url)
    answers = TaskResults(
        partial(
            celery_app, url, namespace=namespace, fleet=fleet_key, patience_s=BATCH_REDIS_PATIENCE_S
        ),
        store, broker_keys(namespace), WaitPolicy(outage_s=1.0, check_s=0.01),
    )  # fmt: skip
    keys = broker_keys(namespace)
    task_id = "9d1f5c7e-2b4a-4e0c-8f3d-000000000002"
    answers.send("orchestrator.run_ticket", ["T-00"], task_id, queue_name(namespace))
    if state != "PENDING":
        answers.app.backend.store_result(task_id, None, state)
    assert answers.task_place(task_id) == "queued"
    assert answers.confirm_lost([task_id]) == []
    store.client.delete(keys.queues[0])  # the message is gone: nobody will run it
    assert answers.task_place(task_id) == "nowhere"
    assert answers.confirm_lost([task_id]) == [task_id]
    answers.app.backend.store_result(task_id, None, "STARTED")  # a worker runs it
    assert answers.task_place(task_id) == "started"
    assert answers.confirm_lost([task_id]) == []
