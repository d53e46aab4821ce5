"""The test Redis server itself (tests/support/redis_server.py): a real server, reachable, restartable on the same port."""

from __future__ import annotations

from orchestrator.storage.redis.client import CoordinationStore

from support.redis_server import RedisServer


def test_the_server_answers_and_restarts_on_the_same_port(
    redis_server: RedisServer, store: CoordinationStore
) -> None:
    store.ping()
    port = redis_server.port
    first_pid = redis_server.process.pid if redis_server.process else None
    redis_server.restart()
    assert redis_server.port == port
    assert redis_server.process is not None and redis_server.process.pid != first_pid
    store.ping()
