"""Everything under the state dir. ``orchestrator.storage`` itself holds what the use cases
are written against: the stores' protocols, opening a state dir's storage, and the records
the stores keep. Everything else comes from the public module that owns it
(``orchestrator.storage.layout``, ``.runs``, ...); the file primitives (``_atomic``,
``_locks``) are private to the package.

    protocols     what app/ may ask of storage (Runs, Decisions, Approvals, Budgets, Locks,
                  DecisionLedger) and Storage, all of them for one state dir
    open, files   which storage a state dir has (files, or PostgreSQL: postgres/)
    layout        every name under the state dir, and the finders;  locate  where it is
    runs          the run store, the ticket lock;  run_ids  what a RUN argument names
    decisions     verdict files;  approvals  approval records, signed
    budget        per-ticket charges;  batch_budget  one batch's model budget
    ledger/       the hash-chained decision ledger and its index (a subpackage)
    redis/        the fleet's stores on Redis (a subpackage; redis imported lazily)

Each name is imported when first asked for (``_face``): ``orchestrator runs`` starts
without the stores' models. The face's one list is the block below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.storage.approvals import Approval as Approval
    from orchestrator.storage.base_checks import BaseCheck as BaseCheck
    from orchestrator.storage.base_checks import BaseCheckKey as BaseCheckKey
    from orchestrator.storage.batch_budget import SharedBudget as SharedBudget
    from orchestrator.storage.batch_budget import Spend as Spend
    from orchestrator.storage.batch_record import BatchRecord as BatchRecord
    from orchestrator.storage.batch_record import BatchSpend as BatchSpend
    from orchestrator.storage.batch_record import BatchTicket as BatchTicket
    from orchestrator.storage.budget import CapsReset as CapsReset
    from orchestrator.storage.budget import ChargeKind as ChargeKind
    from orchestrator.storage.budget import TicketBudget as TicketBudget
    from orchestrator.storage.call_journal import JournaledReply as JournaledReply
    from orchestrator.storage.crash_points import CrashPoint as CrashPoint
    from orchestrator.storage.decisions import VerdictRecord as VerdictRecord
    from orchestrator.storage.files import FileStorage as FileStorage
    from orchestrator.storage.layout import VerdictFile as VerdictFile
    from orchestrator.storage.locate import config_path as config_path
    from orchestrator.storage.locate import resolve_state_dir as resolve_state_dir
    from orchestrator.storage.locate import state_dir as state_dir
    from orchestrator.storage.locate import state_dir_problem as state_dir_problem
    from orchestrator.storage.notify_outbox import OutboxEntry as OutboxEntry
    from orchestrator.storage.open import StateStorage as StateStorage
    from orchestrator.storage.open import close_storages as close_storages
    from orchestrator.storage.open import open_configured as open_configured
    from orchestrator.storage.open import open_database as open_database
    from orchestrator.storage.open import open_state as open_state
    from orchestrator.storage.open import open_storage as open_storage
    from orchestrator.storage.protocols import Approvals as Approvals
    from orchestrator.storage.protocols import Budgets as Budgets
    from orchestrator.storage.protocols import DecisionLedger as DecisionLedger
    from orchestrator.storage.protocols import Decisions as Decisions
    from orchestrator.storage.protocols import Locks as Locks
    from orchestrator.storage.protocols import Runs as Runs
    from orchestrator.storage.protocols import Storage as Storage
    from orchestrator.storage.retention import PrunedMark as PrunedMark
    from orchestrator.storage.runs import LatestRuns as LatestRuns
else:
    from orchestrator.storage._face import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
