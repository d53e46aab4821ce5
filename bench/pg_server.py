"""A PostgreSQL server of a benchmark's own (not a benchmark: dev.sh runs bench_*.py only).

The tests' own server (tests/support/postgres_server.py) is reused: ``initdb`` in a temp dir, a
free loopback port, SCRAM with a random password, run as ``nobody`` when this is root
(PostgreSQL refuses root); unlike the tests' it is durable (fsync on), as a user's is. ``postgres()`` yields it started,
or ``None`` with the reason printed as a ``skipped:`` line when PostgreSQL, psycopg (the
``postgres`` extra) or that module's own imports (pytest, the ``test`` extra) are missing:
a benchmark skips, it does not fail.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _server_module() -> Any:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from support import postgres_server  # type: ignore[import-not-found]  # tests/, imports pytest

    return postgres_server


def missing() -> str | None:
    """Why no server can be had here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        module = _server_module()
    except ImportError as exc:
        return (
            f"tests/support/postgres_server.py cannot be imported ({exc}; pip install -e '.[test]')"
        )
    if module.postgres_bindir() is None:
        return (
            "PostgreSQL is not installed (initdb and postgres; "
            "Debian/Ubuntu: apt-get install postgresql)"
        )
    return None


class BenchPostgres:
    """A started server, and fresh databases on it."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def url(self, database: str = "postgres") -> str:
        return str(self.server.url(database))

    def create_database(self, prefix: str = "bench") -> str:
        """A new, empty database; its URL (the schema is migrated by whoever opens it)."""
        import psycopg

        name = f"{prefix}_{secrets.token_hex(4)}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextmanager
def postgres() -> Iterator[BenchPostgres | None]:
    """A started server (stopped and removed at the end), or None (a line printed)."""
    reason = missing()
    if reason is not None:
        print(f"skipped: {reason}")
        yield None
        return
    module = _server_module()
    bindir = module.postgres_bindir()
    run_as = module.RunAs()
    password = secrets.token_urlsafe(18)
    # Outside any directory of root's mode 0700: the server user must reach it.
    top = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    server = module.PostgresServer(bindir, top, password, run_as, durable=True)
    try:
        module.initdb(bindir, top / "data", password, run_as)
        server.start()
        yield BenchPostgres(server)
    finally:
        server.stop()
        shutil.rmtree(top, ignore_errors=True)
