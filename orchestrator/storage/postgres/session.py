"""What every PostgreSQL store does around its statements: a connection from a URL or a
factory, one transaction per operation, and the driver's errors turned into the store's
own — with the server's words, never the URL or its password (``connect`` masks those).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from orchestrator.storage.postgres.connect import PostgresUnavailable, connect

if TYPE_CHECKING:
    import psycopg

# A connection to use in a ``with`` block: a new one each time (closed at the block's
# end, as psycopg's own connection does), or one kept open and lent (ReusedConnections).
ConnectionFactory = Callable[[], AbstractContextManager["psycopg.Connection[Any]"]]
# A kept connection idle longer than this is pinged before it is lent: the server may
# have been restarted meanwhile, and the first statement on a dead socket would fail.
PING_AFTER_IDLE_S = 2.0


class ReusedConnections:
    """One open connection per thread (and per process: a forked child opens its own),
    lent for one block at a time, so a run's many small transactions do not each pay a
    connect and an authentication. In autocommit mode: each block's
    ``conn.transaction()`` is its own BEGIN … COMMIT, and a ping commits nothing. A
    connection that fails in a block is closed and replaced at the next one."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._local = threading.local()

    @contextmanager
    def __call__(self) -> Iterator[psycopg.Connection[Any]]:
        from psycopg.pq import TransactionStatus

        conn = self._lend()
        try:
            yield conn
        finally:
            # Kept only when it is plainly reusable: alive, and back outside any
            # transaction (a refusal the block raised after its rollback leaves it so).
            if conn.broken or conn.info.transaction_status is not TransactionStatus.IDLE:
                self._drop()
            else:
                self._local.used_at = time.monotonic()

    def _lend(self) -> psycopg.Connection[Any]:
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is not None and (self._local.pid != os.getpid() or conn.closed):
            conn = None
        if conn is not None and _said_goodbye(conn):
            self._drop()  # the server ended it (a restart, pg_terminate_backend) meanwhile
            conn = None
        if conn is not None and time.monotonic() - self._local.used_at > PING_AFTER_IDLE_S:
            try:
                conn.execute("SELECT 1")
            except psycopg.Error:
                self._drop()
                conn = None
        if conn is None:
            conn = connect(self._url)
            conn.autocommit = True
            self._local.conn, self._local.pid = conn, os.getpid()
            self._local.used_at = time.monotonic()
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None and self._local.pid == os.getpid():
            conn.close()  # psycopg's close does not raise on a broken connection

    def close(self) -> None:
        """Close this thread's connection (the others close with their threads)."""
        self._drop()


SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def _said_goodbye(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection has anything to read: the server never speaks to an
    idle session unasked (nothing here LISTENs) except to end it, so readable means its
    FATAL goodbye or a closed socket. No round trip, unlike a ping."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):  # no socket any more
        return True
    return bool(readable)


def connection_factory(source: str | ConnectionFactory) -> ConnectionFactory:
    """A ``postgresql://`` URL (each connection through ``connect``), or a factory as is."""
    if isinstance(source, str):
        url = source
        return lambda: connect(url)
    return source


@contextmanager
def transaction(
    factory: ConnectionFactory,
    *,
    says: str,
    error: Callable[[str], Exception],
    snapshot: bool = False,
    utc: bool = False,
    unavailable: str | None = None,
    pipeline: bool = False,
    implicit: bool = False,
) -> Iterator[psycopg.Connection[Any]]:
    """A connection inside one transaction, committed when the block ends well.

    ``snapshot``: a read-only, repeatable-read one; ``utc``: times read back in UTC;
    ``pipeline``: statements are sent without waiting for each answer (psycopg's pipeline
    mode), so a block that reads only where it must costs a round trip per read, not
    per statement (the BEGIN and the COMMIT included); ``implicit``: no BEGIN and no
    COMMIT, for a block of one statement, which the server runs as a transaction of its
    own (one round trip in all).
    A driver error becomes ``error(f"{says}: …")``; with ``unavailable`` set, a lost
    connection is ``PostgresUnavailable`` naming it instead (try again later)."""
    try:
        import psycopg
    except ImportError:
        raise error(
            f"{says}: psycopg is not installed (pip install 'ticket-orchestrator[postgres]')"
        ) from None
    try:
        with ExitStack() as stack:
            if implicit:
                conn = stack.enter_context(factory())
            else:
                conn = _begun(stack, factory, pipeline=pipeline)
            if snapshot:
                conn.execute(SNAPSHOT)
            if utc:
                conn.execute("SELECT set_config('TimeZone', 'UTC', true)")
            yield conn
    except psycopg.OperationalError as exc:
        if unavailable is None:
            raise error(f"{says}: {exc}".rstrip()) from exc
        reason = str(exc).strip() or type(exc).__name__
        raise PostgresUnavailable(f"{unavailable}: {reason}", reason) from exc
    except psycopg.Error as exc:
        raise error(f"{says}: {exc}".rstrip()) from exc


def _begun(
    stack: ExitStack, factory: ConnectionFactory, *, pipeline: bool
) -> psycopg.Connection[Any]:
    """A connection with its transaction begun, held by ``stack``. A kept connection that
    fails its BEGIN (the server ended it a moment before: nothing of the caller's ran) is
    replaced once by a new one; a pipelined BEGIN is not sent until the block first
    waits, so there a lost connection is the caller's PostgresUnavailable."""
    import psycopg

    for attempt in (1, 2):
        with ExitStack() as inner:
            conn = inner.enter_context(factory())
            try:
                if pipeline:
                    inner.enter_context(conn.pipeline())
                inner.enter_context(conn.transaction())
            except psycopg.OperationalError:
                if attempt == 2 or pipeline:
                    raise
                continue  # the dead connection is dropped as the block ends
            stack.enter_context(inner.pop_all())
            return conn
    raise AssertionError("unreachable")
