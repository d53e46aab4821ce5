"""The Celery app on our Redis, with real worker processes (each its own process group,
HOME and TMPDIR, sharing only the journal as machines share the state dir): every task
runs once, and a worker killed mid-task has its task redelivered to another, once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.app.fleet_key import FleetKey
from orchestrator.batch.celery.celery_app import celery_app, celery_settings, queue_name
from orchestrator.domain.broker_url import BrokerUrl

from conftest import subprocess_env
from support import SUPPORT
from support.redis_server import RedisServer

PASSWORD = "celery-Secret-pw"
RESULT_DEADLINE_S = 60.0


def test_the_settings_ask_for_late_acks_requeue_on_loss_and_signed_json_only(
    fleet_key: FleetKey,
) -> None:
    settings = celery_settings(namespace="fleet", visibility_timeout_s=7200)
    assert settings["task_acks_late"] is True
    assert settings["task_reject_on_worker_lost"] is True
    assert settings["worker_prefetch_multiplier"] == 1
    assert settings["accept_content"] == ["json"]
    assert settings["broker_transport_options"]["visibility_timeout"] == 7200
    assert settings["broker_transport_options"]["global_keyprefix"] == "fleet:celery:"
    assert settings["task_default_queue"] == queue_name("fleet") == "fleet.tickets"
    with pytest.raises(ValueError, match="must be positive"):
        celery_settings(namespace="fleet", visibility_timeout_s=0)
    app = celery_app(
        BrokerUrl(f"redis://:{PASSWORD}@127.0.0.1:6379/0"), namespace="fleet", fleet=fleet_key
    )
    assert app.conf.broker_url == f"redis://:{PASSWORD}@127.0.0.1:6379/0"
    assert app.conf.task_acks_late is True
    # Task messages are signed JSON and nothing else is accepted; results stay JSON.
    assert (app.conf.task_serializer, app.conf.accept_content) == ("auth", ["auth"])
    assert app.conf.result_accept_content == ["json"]
    assert PASSWORD not in repr(settings)
    assert PASSWORD not in str(app.conf.humanize(with_defaults=False, censored=True))


def test_the_result_store_retries_as_long_as_asked_and_by_default_as_celery_does() -> None:
    default = celery_settings(namespace="f")
    assert "retry_policy" not in default["result_backend_transport_options"]
    assert "result_backend_always_retry" not in default
    assert "task_publish_retry_policy" not in default
    for patience_s in (1.0, 30.0, 300.0):
        settings = celery_settings(namespace="f", patience_s=patience_s)
        policy = settings["result_backend_transport_options"]["retry_policy"]
        # Pauses of 0, 0.5, then 1 s each: the tries span about the patience asked for.
        pauses = [
            min(policy["interval_start"] + policy["interval_step"] * n, policy["interval_max"])
            for n in range(policy["max_retries"])
        ]
        assert patience_s <= sum(pauses) <= patience_s + 1.5
        # A task's state is read and written again after a random pause of up to a
        # second (half a second on average): twice the patience in tries, and a few more.
        assert settings["result_backend_always_retry"] is True
        assert settings["result_backend_max_sleep_between_retries_ms"] == 1000
        assert settings["result_backend_max_retries"] >= 2 * patience_s
        # Publishing (a worker's retry of a ticket) follows the reconnections' pauses.
        assert settings["task_publish_retry"] is True
        assert settings["task_publish_retry_policy"] == policy


class Fleet:
    def __init__(
        self, server: RedisServer, namespace: str, root: Path, visibility_s: float, key: FleetKey
    ):
        self.server = server
        self.namespace = namespace
        self.root = root
        self.visibility_s = visibility_s
        self.key = key
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.app = celery_app(
            BrokerUrl(server.url), namespace=namespace, fleet=key, visibility_timeout_s=visibility_s
        )

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        home = self.root / name
        (home / "tmp").mkdir(parents=True)
        env = subprocess_env(
            HOME=str(home),
            TMPDIR=str(home / "tmp"),
            TEST_BROKER_URL=self.server.url,
            TEST_NAMESPACE=self.namespace,
            TEST_VISIBILITY_TIMEOUT_S=str(self.visibility_s),
            TEST_FLEET_KEY=str(self.key.key),
            TEST_FLEET_CERT=str(self.key.certificate),
        )
        env["PYTHONPATH"] = f"{SUPPORT}{os.pathsep}{env['PYTHONPATH']}"
        log = (home / "worker.log").open("wb")
        worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "celery_tasks", "worker",
                "--pool", "prefork", "--concurrency", "1", "--hostname", f"{name}@fleet", "--loglevel", "INFO",
                "--without-heartbeat", "--without-mingle", "--without-gossip",
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=home, start_new_session=True,
        )  # fmt: skip
        self.workers[name] = worker
        return worker

    def log(self, name: str) -> str:
        return (self.root / name / "worker.log").read_text(errors="replace")

    def stop(self) -> None:
        for worker in self.workers.values():
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
                    worker.wait()


@pytest.fixture
def fleet_factory(
    redis_servers: Callable[..., RedisServer], namespace: str, tmp_path: Path, fleet_key: FleetKey
) -> Iterator[Callable[[float], Fleet]]:
    fleets: list[Fleet] = []
    server = redis_servers(password=PASSWORD)

    def make(visibility_s: float) -> Fleet:
        fleet = Fleet(server, namespace, tmp_path / f"fleet-{len(fleets)}", visibility_s, fleet_key)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop()


@pytest.mark.slow
def test_twelve_tickets_over_two_workers_each_run_exactly_once(
    fleet_factory: Callable[[float], Fleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(3600)
    journal = tmp_path / "journal.txt"
    results = [
        fleet.app.send_task("orchestrator.test.stage", args=[f"T-{n}", str(journal)])
        for n in range(12)
    ]
    fleet.start_worker("a")
    fleet.start_worker("b")
    answers = [result.get(timeout=RESULT_DEADLINE_S) for result in results]
    assert all(answer.endswith("at delivery 1") for answer in answers), answers
    lines = journal.read_text().splitlines()
    assert Counter(line.split()[0] for line in lines) == {"start": 12, "done": 12}
    assert sorted({line.split()[1] for line in lines}) == sorted(f"T-{n}" for n in range(12))
    for name in ("a", "b"):
        assert PASSWORD not in fleet.log(name)


@pytest.mark.slow
def test_a_worker_killed_mid_ticket_has_it_redelivered_to_another_once(
    fleet_factory: Callable[[float], Fleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(2.0)
    journal = tmp_path / "journal.txt"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(RESULT_DEADLINE_S)
        port = listener.getsockname()[1]
        result = fleet.app.send_task("orchestrator.test.stage", args=["T-1", str(journal), port])
        first = fleet.start_worker("a")
        connection, _ = listener.accept()  # the task is running, in the middle
        with connection:
            assert connection.makefile().readline().startswith("started ")
    os.killpg(first.pid, signal.SIGKILL)  # the machine is lost: worker and pool, no goodbye
    first.wait()
    fleet.start_worker("b")
    assert result.get(timeout=RESULT_DEADLINE_S) == "T-1 done by b@fleet at delivery 2"
    assert journal.read_text().splitlines() == [
        "start T-1 a@fleet",
        "start T-1 b@fleet",
        "done T-1 b@fleet",
    ]


@pytest.mark.slow
def test_a_pool_process_killed_mid_ticket_has_it_requeued_not_failed(
    fleet_factory: Callable[[float], Fleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(3600)  # no waiting for the visibility timeout: it is rejected
    journal = tmp_path / "journal.txt"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(RESULT_DEADLINE_S)
        port = listener.getsockname()[1]
        result = fleet.app.send_task("orchestrator.test.stage", args=["T-1", str(journal), port])
        fleet.start_worker("a")
        connection, _ = listener.accept()
        with connection:
            started = connection.makefile().readline().split()
    pool_process = int(started[1])
    os.kill(pool_process, signal.SIGKILL)  # the pool process only: the worker lives on
    assert result.get(timeout=RESULT_DEADLINE_S) == "T-1 done by a@fleet at delivery 2"
    assert journal.read_text().splitlines() == [
        "start T-1 a@fleet",
        "start T-1 a@fleet",
        "done T-1 a@fleet",
    ]
