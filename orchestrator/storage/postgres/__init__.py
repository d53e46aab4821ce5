"""The orchestrator's state on PostgreSQL (issue 30): what the rest may import, from
here only.

    connect.connect              a connection from a ``postgresql://`` URL, bounded
    connect.PostgresUnavailable  no connection could be made (the URL masked)
    migrate.migrate              the schema brought up to date, under an advisory lock
    migrate.MigrationError       ... refused: SchemaTooNew (a newer orchestrator migrated
                                 the database), MigrationFailed (one file's SQL failed)
    migrations/NNNN_<name>.sql   the schema, one numbered step per file (package data)
    ledger.PostgresLedger        the decision ledger: the file ledger's rows and hashes
    ledger.export_ledger, import_ledger   a ledger moved to a file ledger and back
    budgets.PostgresBudgets      per-ticket charges, each one transaction (charge_within)
    budgets.PostgresBatchBudget  a batch's shared model budget
    leases.PostgresLeases        ticket leases and their fencing tokens (LeaseToken)
    leases.LeaseFencedOut        a write refused: the lease is gone or someone else's
    transfer.export_state, import_state   a whole state dir moved in and out (TransferReport)
    mirror.StateMirror           the state dir's files (run records too) published, each
                                 write fenced by the lease in its transaction, and hydrated
    mirror.route                 which table and key a state-dir path is kept under, if any
    mirror.rebase_record         a run record's paths moved onto another state dir
    claim.claim, PostgresClaim   a ticket held on those leases, renewed by a heartbeat
    storage.PostgresStorage      all of them for one state dir, its working copy: what
                                 ``Services.storage`` is with ``[storage] url`` set
                                 (opened by ``storage.open.open_storage``)

psycopg (the ``postgres`` extra) is imported inside ``connect`` and ``migrate`` only, when
they are called: importing this package never loads it, so the local mode neither pays
for it nor needs it installed. The two modules are imported here eagerly (they are
small and import no driver), because each holds a function of its own name: once a
submodule is imported, Python sets it as the package's attribute, and a lazy face would
then hand out the module where the function was asked for.
"""

from __future__ import annotations

from orchestrator.storage.postgres.budgets import CappedCharge as CappedCharge
from orchestrator.storage.postgres.budgets import PostgresBatchBudget as PostgresBatchBudget
from orchestrator.storage.postgres.budgets import PostgresBudgets as PostgresBudgets
from orchestrator.storage.postgres.claim import PostgresClaim as PostgresClaim
from orchestrator.storage.postgres.claim import claim as claim
from orchestrator.storage.postgres.connect import PostgresUnavailable as PostgresUnavailable
from orchestrator.storage.postgres.connect import connect as connect
from orchestrator.storage.postgres.leases import LeaseFencedOut as LeaseFencedOut
from orchestrator.storage.postgres.leases import LeaseToken as LeaseToken
from orchestrator.storage.postgres.leases import PostgresLeases as PostgresLeases
from orchestrator.storage.postgres.ledger import PostgresLedger as PostgresLedger
from orchestrator.storage.postgres.ledger import export_ledger as export_ledger
from orchestrator.storage.postgres.ledger import import_ledger as import_ledger
from orchestrator.storage.postgres.migrate import MigrationError as MigrationError
from orchestrator.storage.postgres.migrate import MigrationFailed as MigrationFailed
from orchestrator.storage.postgres.migrate import SchemaTooNew as SchemaTooNew
from orchestrator.storage.postgres.migrate import known_migrations as known_migrations
from orchestrator.storage.postgres.migrate import migrate as migrate
from orchestrator.storage.postgres.mirror import Route as Route
from orchestrator.storage.postgres.mirror import StateMirror as StateMirror
from orchestrator.storage.postgres.mirror import rebase_record as rebase_record
from orchestrator.storage.postgres.mirror import route as route
from orchestrator.storage.postgres.session import ConnectionFactory as ConnectionFactory
from orchestrator.storage.postgres.storage import PostgresStorage as PostgresStorage
from orchestrator.storage.postgres.storage import PostgresTicketLocks as PostgresTicketLocks
from orchestrator.storage.postgres.transfer import TransferReport as TransferReport
from orchestrator.storage.postgres.transfer import export_state as export_state
from orchestrator.storage.postgres.transfer import import_state as import_state
