"""The door to PostgreSQL (orchestrator/storage/postgres/connect.py): a connection from a
URL, and every failure to make one a ``PostgresUnavailable`` that names the server with
its password masked, in its message and in anything it chains."""

from __future__ import annotations

import subprocess
import sys
import traceback

import pytest

from orchestrator.domain.errors import EXIT_LOCKED
from orchestrator.storage.postgres import PostgresUnavailable, connect

from conftest import ROOT
from support.postgres_server import PostgresServer
from support.server_output import free_loopback_port

SECRET = "s3cret-Pa55word-never-shown"


def shown(error: BaseException) -> str:
    """Everything a user or a log could see of ``error``: its traceback, chain included."""
    return "".join(traceback.format_exception(error))


def test_a_connection_from_the_url(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert conn.execute("SELECT current_user, 6 * 7").fetchone() == ("postgres", 42)
        assert conn.info.parameter_status("application_name") == "orchestrator"


def test_a_wrong_password_is_unavailable_and_never_shown(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(password=SECRET)
    with pytest.raises(PostgresUnavailable) as caught:
        connect(url)
    error = caught.value
    assert str(error).startswith(
        f"cannot reach PostgreSQL at postgresql://postgres:***@127.0.0.1:{postgres_server.port}/postgres: "
    )
    assert 'password authentication failed for user "postgres"' in str(error)
    assert error.exit_code == EXIT_LOCKED
    for text in (shown(error), error.reason, repr(error)):
        assert SECRET not in text and postgres_server.password not in text


def test_a_closed_port_is_unavailable_within_the_timeout() -> None:
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{free_loopback_port()}/db"
    with pytest.raises(PostgresUnavailable) as caught:
        connect(url, timeout_s=2)
    assert "Connection refused" in str(caught.value)
    assert "postgresql://postgres:***@127.0.0.1:" in str(caught.value)
    assert SECRET not in shown(caught.value)


def test_a_malformed_url_is_refused_without_its_password() -> None:
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/db"
    with pytest.raises(PostgresUnavailable) as caught:
        connect(url)
    assert "postgresql://postgres:***@127.0.0.1:notaport/db" in str(caught.value)
    assert SECRET not in shown(caught.value)


def test_importing_the_face_loads_no_driver() -> None:
    """The local mode never pays for psycopg, nor needs it installed."""
    probe = (
        "import sys, orchestrator.storage.postgres as pg\n"
        "assert 'psycopg' not in sys.modules, 'psycopg loaded'\n"
        "assert callable(pg.connect) and callable(pg.migrate)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
