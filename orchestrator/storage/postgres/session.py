"""What every PostgreSQL store does around its statements: a connection from a URL or a
factory, one transaction per operation, and the driver's errors turned into the store's
own — with the server's words, never the URL or its password (``connect`` masks those).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from orchestrator.storage.postgres.connect import PostgresUnavailable, connect

if TYPE_CHECKING:
    import psycopg

ConnectionFactory = Callable[[], "psycopg.Connection[Any]"]
SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


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
) -> Iterator[psycopg.Connection[Any]]:
    """A connection inside one transaction, committed when the block ends well.

    ``snapshot``: a read-only, repeatable-read one; ``utc``: times read back in UTC.
    A driver error becomes ``error(f"{says}: …")``; with ``unavailable`` set, a lost
    connection is ``PostgresUnavailable`` naming it instead (try again later)."""
    try:
        import psycopg
    except ImportError:
        raise error(
            f"{says}: psycopg is not installed (pip install 'ticket-orchestrator[postgres]')"
        ) from None
    try:
        with factory() as conn, conn.transaction():
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
