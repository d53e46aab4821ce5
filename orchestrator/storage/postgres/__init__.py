"""The orchestrator's state on PostgreSQL (issue 30): what the rest may import, from
here only.

    connect.connect              a connection from a ``postgresql://`` URL, bounded
    connect.PostgresUnavailable  no connection could be made (the URL masked)
    migrate.migrate              the schema brought up to date, under an advisory lock
    migrate.MigrationError       ... refused: SchemaTooNew (a newer orchestrator migrated
                                 the database), MigrationFailed (one file's SQL failed)
    migrations/NNNN_<name>.sql   the schema, one numbered step per file (package data)

psycopg (the ``postgres`` extra) is imported inside ``connect`` and ``migrate`` only, when
they are called: importing this package never loads it, so the local mode neither pays
for it nor needs it installed. The two modules are imported here eagerly (they are
small and import no driver), because each holds a function of its own name: once a
submodule is imported, Python sets it as the package's attribute, and a lazy face would
then hand out the module where the function was asked for.
"""

from __future__ import annotations

from orchestrator.storage.postgres.connect import PostgresUnavailable, connect
from orchestrator.storage.postgres.migrate import (
    MigrationError,
    MigrationFailed,
    SchemaTooNew,
    known_migrations,
    migrate,
)

__all__ = [
    "MigrationError",
    "MigrationFailed",
    "PostgresUnavailable",
    "SchemaTooNew",
    "connect",
    "known_migrations",
    "migrate",
]
