"""The test PostgreSQL server itself (tests/support/postgres_server.py): a fresh database per
test, password authentication, a restart on the same port that keeps the data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import postgres_server
from support.postgres_server import PostgresServer, RunAs, postgres_bindir


def test_pg_url_is_a_fresh_database_the_password_opens(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    import psycopg

    assert pg_url.startswith(f"postgresql://postgres:{postgres_server.password}@127.0.0.1:")
    with psycopg.connect(pg_url, connect_timeout=10) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
        assert tables == (0,)
        assert conn.execute("SELECT current_database()").fetchone() == (pg_url.rsplit("/", 1)[1],)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres_server.url(password="not-it"), connect_timeout=10)


def test_a_restart_keeps_the_port_and_the_data(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n integer)")
        conn.execute("INSERT INTO kept VALUES (7)")
    port = postgres_server.port
    postgres_server.restart()
    assert postgres_server.port == port
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]


def test_the_server_runs_as_an_unprivileged_user(postgres_server: PostgresServer) -> None:
    """PostgreSQL refuses root: under root (CI) the server runs as ``nobody``."""
    assert postgres_server.process is not None
    uid = os.stat(f"/proc/{postgres_server.process.pid}").st_uid
    assert uid != 0
    assert uid == (os.geteuid() if RunAs().ids is None else RunAs().ids[0])  # type: ignore[index]


def fake_bindir(where: Path) -> Path:
    where.mkdir(parents=True)
    for name in ("initdb", "postgres"):
        (where / name).write_text("#!/bin/sh\n")
        (where / name).chmod(0o755)
    return where


def test_the_binaries_are_found_on_path_then_in_debians_newest_directory(tmp_path: Path) -> None:
    debian = tmp_path / "usr/lib/postgresql"
    fake_bindir(debian / "9.6/bin")
    newest = fake_bindir(debian / "15/bin")
    fake_bindir(debian / "13/bin")
    (debian / "16/bin").mkdir(parents=True)  # a client-only install: no server here
    searched = (f"{debian}/*/bin",)
    assert postgres_bindir(path="/nonexistent", searched=searched) == newest
    on_path = fake_bindir(tmp_path / "local/bin")
    assert postgres_bindir(path=str(on_path), searched=searched) == on_path
    assert postgres_bindir(path="/nonexistent", searched=()) is None


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_a_missing_postgresql_skips_with_its_reason_but_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setattr(postgres_server, "postgres_bindir", lambda: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"PostgreSQL is not installed.*apt-get install postgresql"):
        postgres_server.require_postgres()
