"""``session.ReusedConnections``: one connection per thread, lent block by block, each
block its own transaction; a connection the server dropped (a restart) is replaced, not
handed out dead."""

from __future__ import annotations

import threading

import pytest

from orchestrator.domain.errors import StateError
from orchestrator.storage.postgres.session import ReusedConnections, transaction

from support.postgres_server import PostgresServer


def backend_pid(connections: ReusedConnections) -> int:
    with transaction(connections, says="test", error=StateError) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def test_one_thread_reuses_its_connection(pg_url: str) -> None:
    connections = ReusedConnections(pg_url)
    try:
        assert backend_pid(connections) == backend_pid(connections)
    finally:
        connections.close()


def test_each_block_commits_or_rolls_back_on_its_own(pg_url: str) -> None:
    connections = ReusedConnections(pg_url)
    try:
        with transaction(connections, says="t", error=StateError) as conn:
            conn.execute("CREATE TABLE t (n int)")
        with (
            pytest.raises(ZeroDivisionError),
            transaction(connections, says="t", error=StateError) as conn,
        ):
            conn.execute("INSERT INTO t VALUES (1)")
            raise ZeroDivisionError
        with transaction(connections, says="t", error=StateError) as conn:
            conn.execute("INSERT INTO t VALUES (2)")
        with transaction(connections, says="t", error=StateError) as conn:
            assert conn.execute("SELECT array_agg(n) FROM t").fetchone() == ([2],)
    finally:
        connections.close()


def test_threads_do_not_share_a_connection(pg_url: str) -> None:
    connections = ReusedConnections(pg_url)
    pids: list[int] = []
    workers = [
        threading.Thread(target=lambda: pids.append(backend_pid(connections))) for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(set(pids)) == 3


@pytest.mark.slow
def test_a_restarted_server_gets_a_new_connection(
    pg_url: str, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orchestrator.storage.postgres.session.PING_AFTER_IDLE_S", 0.0)
    connections = ReusedConnections(pg_url)
    try:
        before = backend_pid(connections)
        postgres_server.restart()
        assert backend_pid(connections) != before  # pinged, found dead, replaced
    finally:
        connections.close()


def test_a_kept_connection_the_server_ended_is_replaced_not_failed(pg_url: str) -> None:
    import psycopg

    connections = ReusedConnections(pg_url)
    try:
        for _ in range(3):  # ended just before it is lent again, each time
            before = backend_pid(connections)
            with psycopg.connect(pg_url, autocommit=True) as admin:
                assert admin.execute("SELECT pg_terminate_backend(%s)", (before,)).fetchone() == (
                    True,
                )
            assert backend_pid(connections) != before
    finally:
        connections.close()
