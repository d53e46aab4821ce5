"""The schema, brought up to date by numbered SQL files.

``migrations/NNNN_<name>.sql`` are applied in version order, each in a transaction of its
own that also records it in ``schema_version`` (made here when absent): a migration that
fails is rolled back whole, and those before it stay applied. Every transaction first
takes ``pg_advisory_xact_lock(MIGRATION_LOCK)`` and then reads what is applied, so two
migrators started together (two workers of a fleet starting at once) apply each
migration exactly once: the second waits, then finds it done.

A database that records a version this code does not know was migrated by a newer
orchestrator: it is refused (``SchemaTooNew``), never written to with an older idea of
the schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from orchestrator.domain.errors import EXIT_STATE, OrchestratorError

if TYPE_CHECKING:
    import psycopg

# The advisory lock every migrator takes: one fixed key for the whole schema ("orchestr"
# in ASCII, so it is recognisable in pg_locks and unlikely to meet another program's).
MIGRATION_LOCK = 0x6F72636865737472
# A migrator waiting longer than this for the lock (or a migration for a table's lock)
# gives up with an error rather than hanging a worker's start.
LOCK_TIMEOUT_S = 60
MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")

_SCHEMA_VERSION = b"""
CREATE TABLE IF NOT EXISTS schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(OrchestratorError):
    """The schema could not be brought up to date; nothing half-applied is left."""

    exit_code = EXIT_STATE


class SchemaTooNew(MigrationError):
    """The database records versions this orchestrator does not know."""


class MigrationFailed(MigrationError):
    """One migration's SQL failed: it was rolled back; the message names its file."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    file: str
    sql: bytes = field(repr=False)


def known_migrations(directory: Traversable | None = None) -> list[Migration]:
    """The migrations in ``directory`` (by default the package's ``migrations/``), in
    version order. A ``.sql`` file not named ``NNNN_<name>.sql``, or two with one version,
    is a mistake in the package, refused here rather than skipped."""
    where = directory if directory is not None else files(__package__) / "migrations"
    found: dict[int, Migration] = {}
    for entry in where.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = MIGRATION_FILE.fullmatch(entry.name)
        if match is None:
            raise MigrationError(f"migration file {entry.name!r} is not named NNNN_<name>.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(
                f"migrations {found[version].file!r} and {entry.name!r} share version {version}"
            )
        found[version] = Migration(version, match.group(2), entry.name, entry.read_bytes())
    return [found[v] for v in sorted(found)]


def _where(conn: psycopg.Connection[Any]) -> str:
    info = conn.info  # never the password
    return f"{info.host}:{info.port}/{info.dbname}"


def migrate(
    conn: psycopg.Connection[Any],
    *,
    directory: Traversable | None = None,
    lock_timeout_s: int = LOCK_TIMEOUT_S,
) -> list[int]:
    """Apply every migration the database lacks, in order; the versions applied (empty
    when it was up to date). ``conn`` must not be inside a transaction."""
    import psycopg

    migrations = known_migrations(directory)
    known = {m.version for m in migrations}
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise MigrationError("migrate needs a connection outside a transaction")
    applied: list[int] = []
    while True:
        with conn.transaction():
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{lock_timeout_s}s",))
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(_SCHEMA_VERSION)
            done = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
            unknown = sorted(done - known)
            if unknown:
                raise SchemaTooNew(
                    f"the database {_where(conn)} has schema version {unknown[-1]}, which this "
                    f"orchestrator does not know (it knows up to {max(known, default=0)}): a "
                    "newer orchestrator migrated it; upgrade this one to use it"
                )
            pending = [m for m in migrations if m.version not in done]
            if not pending:
                return applied
            migration = pending[0]
            try:
                # Several statements in one string: psycopg sends a query without
                # parameters as one simple query. An error leaves the transaction block,
                # which rolls the whole migration back.
                conn.execute(migration.sql)
            except psycopg.Error as exc:
                raise MigrationFailed(
                    f"migration {migration.file} failed on {_where(conn)} and was rolled "
                    f"back (the versions before it stay applied): {str(exc).strip()}"
                ) from exc
            # clock_timestamp(), not the default now(): now() is when the transaction
            # began, before it waited for the lock, so it could order the rows wrongly.
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at)"
                " VALUES (%s, %s, clock_timestamp())",
                (migration.version, migration.name),
            )
        applied.append(migration.version)
