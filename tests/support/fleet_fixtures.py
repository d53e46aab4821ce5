"""Fixtures for the fleet's tests (a pytest plugin): a real ``redis-server`` per test (``redis_server``;
``redis_servers`` starts more, with persistence or a password, and each can be restarted
on its port), a coordination store on it under a namespace of the test's own, and
``workers``: real worker processes, each in its own process group.

Where ``redis-server`` is not installed the tests skip, and the session's summary says
so in one line whatever ``-r`` asks for; under ``CI=true`` they fail instead, so CI
always exercises the real server (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.app.fleet_key import FleetKey
from orchestrator.domain.broker_url import BROKER_URL_ENV, BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore

from conftest import subprocess_env
from support import SUPPORT
from support.fleet_keys import install_fleet_key
from support.fleet_machines import FleetWorkers
from support.lossy_proxy import LossyProxy
from support.redis_server import RedisServer, redis_server_binary

MISSING = (
    "redis-server is not installed: the distributed tests need a real one "
    "(Debian/Ubuntu: apt-get install redis-server; .ci/run installs it in CI)"
)


def require_redis_server() -> str:
    binary = redis_server_binary()
    if binary is not None:
        return binary
    if os.environ.get("CI"):
        pytest.fail(f"CI must exercise the distributed mode, but {MISSING}")
    pytest.skip(MISSING)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Counted from the skip reports, which reach the controller under pytest-xdist too.
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"distributed tests skipped ({len(skipped)}): {MISSING}", yellow=True
        )


@pytest.fixture(autouse=True)
def _no_broker_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BROKER_URL_ENV, raising=False)


ServerFactory = Callable[..., RedisServer]


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start servers (``persist=``, ``password=``); all are stopped after the test."""
    binary = require_redis_server()
    started: list[RedisServer] = []

    def start(*, persist: bool = False, password: str | None = None) -> RedisServer:
        server = RedisServer(
            binary, tmp_path / f"redis-{len(started)}", persist=persist, password=password
        )
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def redis_server(redis_servers: ServerFactory) -> RedisServer:
    return redis_servers()


@pytest.fixture
def fleet_key(tmp_path: Path) -> FleetKey:
    """The fleet's signing key and certificate (issue 40), mode 0600, in a folder of the
    test's own: what ``celery_app`` signs and verifies task messages with."""
    return install_fleet_key(tmp_path / "fleet-key")


@pytest.fixture
def namespace() -> str:
    return f"test-{secrets.token_hex(4)}"


@pytest.fixture
def store(redis_server: RedisServer, namespace: str) -> Iterator[CoordinationStore]:
    coordination = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    yield coordination
    coordination.close()


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[LossyProxy]:
    """``tests/support/lossy_proxy.py`` in front of ``redis_server``: it can lose an answer."""
    assert redis_server.port is not None
    lossy = LossyProxy(redis_server.port)
    yield lossy
    lossy.close()


@pytest.fixture
def machines() -> Iterator[list[FleetWorkers]]:
    """Fleets of ``orchestrator worker`` processes a test starts; all stopped after it."""
    fleets: list[FleetWorkers] = []
    yield fleets
    for fleet in fleets:
        fleet.stop_all()


class Workers:
    """Worker processes running one of tests/support's scripts, each in its own process
    group; all of them are killed after the test if still running."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(self, script: str, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(SUPPORT / script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            start_new_session=True,
        )
        self.started.append(process)
        return process

    def start_together(self, script: str, args: list[list[str]]) -> list[subprocess.Popen[str]]:
        """Start one process per argument list; once all are connected (each prints
        ``ready``), release them at once (a line on each one's stdin)."""
        processes = [self.start(script, *each) for each in args]
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n", f"{script} exited {process.wait()}"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        return processes

    @staticmethod
    def finish(process: subprocess.Popen[str], timeout_s: float = 60.0) -> list[str]:
        """The rest of a worker's output, once it exited 0."""
        stdout, _ = process.communicate(timeout=timeout_s)
        assert process.returncode == 0, stdout
        return stdout.splitlines()

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGCONT)
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def workers() -> Iterator[Workers]:
    started = Workers()
    yield started
    started.stop_all()
