"""Fixtures for the distributed tests: a real ``redis-server`` per test, and a
coordination store on it under a namespace of the test's own.

Where ``redis-server`` is not installed the tests skip, and the session's summary says
so in one line whatever ``-r`` asks for; under ``CI=true`` they fail instead, so CI
always exercises the real server (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.distributed.client import CoordinationStore
from orchestrator.domain.broker_url import BROKER_URL_ENV, BrokerUrl

from redis_server import RedisServer, redis_server_binary

_skipped: list[str] = []
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
    _skipped.append(MISSING)
    pytest.skip(MISSING)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"distributed tests skipped ({len(_skipped)}): {_skipped[0]}", yellow=True
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
def namespace() -> str:
    return f"test-{secrets.token_hex(4)}"


@pytest.fixture
def store(redis_server: RedisServer, namespace: str) -> Iterator[CoordinationStore]:
    coordination = CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
    yield coordination
    coordination.close()
