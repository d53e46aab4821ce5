"""Everything under the state dir, behind one face: what the rest of the orchestrator
imports from ``orchestrator.storage`` (and the ledger from ``orchestrator.storage.ledger``,
a fleet's Redis stores from ``orchestrator.storage.redis``) — never one of the modules
below, whose file primitives (atomic writes, flocks) are private to the package.

    protocols     what app/ may ask of storage (Runs, Decisions, Approvals, Budgets, Locks,
                  DecisionLedger) and Storage, all of them for one state dir
    files         FileStorage(state_dir): the files backend, the default
    layout        every name under the state dir, and the finders
    runs          the run store, the ticket lock;  run_ids  what a RUN argument names
    run_listing   each record's head, unvalidated, for a listing (``orchestrator runs``)
    decisions     verdict files;  approvals  approval records, signed
    playbook      the project's playbook entries (``<config root>/playbook/``), and the
                  built-in ones
    budget        per-ticket charges;  batch_budget  one batch's model budget
    ledger/       the hash-chained decision ledger and its index (a subpackage)
    redis/        the fleet's stores on Redis (a subpackage; redis imported lazily)
    ...           transcripts, call_journal, baselines, batch_record, retention,
                  ticket_queue, published, locate, crash_points

Each name is imported when first asked for (PEP 562), so a command that needs only the
ledger does not pay for the stores' models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.storage._face import lazy_getattr

_FROM: dict[str, str] = {
    "AUTO": "approvals",
    "Approval": "approvals",
    "ApprovalKeys": "approvals",
    "ApprovalRefused": "approvals",
    "SignedApprovals": "approvals",
    "UNSIGNED_BEFORE": "approvals",
    "os_user": "approvals",
    "problem": "approvals",
    "read_approval": "approvals",
    "write_approval": "approvals",
    "verdict_sha256": "approvals",
    "atomic_write": "_atomic",
    "IntakeFiles": "intake",
    "BaselineStore": "baselines",
    "BaseCheck": "base_checks",
    "BaseCheckKey": "base_checks",
    "BaseCheckStore": "base_checks",
    "check_digest": "base_checks",
    "BATCH_ENV": "batch_budget",
    "BatchBudget": "batch_budget",
    "SharedBudget": "batch_budget",
    "Spend": "batch_budget",
    "estimate_cost": "batch_budget",
    "over_cap": "batch_budget",
    "BatchRecord": "batch_record",
    "BatchSpend": "batch_record",
    "BatchTicket": "batch_record",
    "LATEST": "batch_record",
    "is_batch_id": "batch_record",
    "latest_batch_id": "batch_record",
    "read_batch_record": "batch_record",
    "write_batch_record": "batch_record",
    "write_batch_queue": "batch_record",
    "read_batch_queue": "batch_record",
    "BudgetStore": "budget",
    "NotifyOutbox": "notify_outbox",
    "OutboxEntry": "notify_outbox",
    "CapsReset": "budget",
    "ChargeKind": "budget",
    "TicketBudget": "budget",
    "CallJournals": "call_journal",
    "JournaledReply": "call_journal",
    "CRASH_ENV": "crash_points",
    "CrashPoint": "crash_points",
    "crash_point": "crash_points",
    "VerdictRecord": "decisions",
    "read_verdict": "decisions",
    "write_verdict": "decisions",
    "FileStorage": "files",
    "writes_checked_by": "files",
    "LEDGER_FILE": "layout",
    "StateLayout": "layout",
    "VerdictFile": "layout",
    "is_run_id": "layout",
    "run_record_paths": "layout",
    "run_records_by_ticket": "layout",
    "ticket_of": "layout",
    "verdict_files": "layout",
    "config_path": "locate",
    "resolve_state_dir": "locate",
    "state_dir": "locate",
    "state_dir_problem": "locate",
    "Approvals": "protocols",
    "Budgets": "protocols",
    "DecisionLedger": "protocols",
    "Decisions": "protocols",
    "Locks": "protocols",
    "Runs": "protocols",
    "Storage": "protocols",
    "publish": "published",
    "rotate_log": "published",
    "PrunedMark": "retention",
    "prune_base_checks": "retention",
    "prune_batch_logs": "retention",
    "prune_runs": "retention",
    "read_mark": "retention",
    "resolve_run_id": "run_ids",
    "run_headers": "run_listing",
    "LatestRuns": "runs",
    "RunStore": "runs",
    "interrupts_held": "runs",
    "read_record_file": "runs",
    "ticket_lock": "runs",
    "ticket_files": "ticket_queue",
    "copy_queued_ticket": "ticket_queue",
    "NotQueued": "fleet_queue",
    "check_ids": "fleet_queue",
    "note_queued": "fleet_queue",
    "queued_ticket": "fleet_queue",
    "write_sub_ticket": "ticket_queue",
    "read_texts": "transcripts",
    "replies_dir": "transcripts",
    "write_texts": "transcripts",
    "open_state": "open",
    "StateStorage": "open",
    "open_storage": "open",
    "open_configured": "open",
    "open_database": "open",
    "close_storages": "open",
    "LazyEntries": "playbook",
    "PlaybookStore": "playbook",
    "builtin_entries": "playbook",
    "is_builtin": "playbook",
}
__all__ = [
    "AUTO",
    "BATCH_ENV",
    "CRASH_ENV",
    "LATEST",
    "LEDGER_FILE",
    "UNSIGNED_BEFORE",
    "Approval",
    "ApprovalKeys",
    "ApprovalRefused",
    "Approvals",
    "BaseCheck",
    "BaseCheckKey",
    "BaseCheckStore",
    "BaselineStore",
    "BatchBudget",
    "BatchRecord",
    "BatchSpend",
    "BatchTicket",
    "BudgetStore",
    "Budgets",
    "CallJournals",
    "CapsReset",
    "ChargeKind",
    "CrashPoint",
    "DecisionLedger",
    "Decisions",
    "FileStorage",
    "IntakeFiles",
    "JournaledReply",
    "LatestRuns",
    "LazyEntries",
    "Locks",
    "NotQueued",
    "NotifyOutbox",
    "OutboxEntry",
    "PlaybookStore",
    "PrunedMark",
    "RunStore",
    "Runs",
    "SharedBudget",
    "SignedApprovals",
    "Spend",
    "StateLayout",
    "StateStorage",
    "Storage",
    "TicketBudget",
    "VerdictFile",
    "VerdictRecord",
    "atomic_write",
    "builtin_entries",
    "check_digest",
    "check_ids",
    "close_storages",
    "config_path",
    "copy_queued_ticket",
    "crash_point",
    "estimate_cost",
    "interrupts_held",
    "is_batch_id",
    "is_builtin",
    "is_run_id",
    "latest_batch_id",
    "note_queued",
    "open_configured",
    "open_database",
    "open_state",
    "open_storage",
    "os_user",
    "over_cap",
    "problem",
    "prune_base_checks",
    "prune_batch_logs",
    "prune_runs",
    "publish",
    "queued_ticket",
    "read_approval",
    "read_batch_queue",
    "read_batch_record",
    "read_mark",
    "read_record_file",
    "read_texts",
    "read_verdict",
    "replies_dir",
    "resolve_run_id",
    "resolve_state_dir",
    "rotate_log",
    "run_headers",
    "run_record_paths",
    "run_records_by_ticket",
    "state_dir",
    "state_dir_problem",
    "ticket_files",
    "ticket_lock",
    "ticket_of",
    "verdict_files",
    "verdict_sha256",
    "write_approval",
    "write_batch_queue",
    "write_batch_record",
    "write_sub_ticket",
    "write_texts",
    "write_verdict",
    "writes_checked_by",
]


__getattr__ = lazy_getattr(__name__, _FROM)


if TYPE_CHECKING:
    from orchestrator.storage._atomic import atomic_write
    from orchestrator.storage.approvals import (
        AUTO,
        UNSIGNED_BEFORE,
        Approval,
        ApprovalKeys,
        ApprovalRefused,
        SignedApprovals,
        os_user,
        problem,
        read_approval,
        verdict_sha256,
        write_approval,
    )
    from orchestrator.storage.base_checks import (
        BaseCheck,
        BaseCheckKey,
        BaseCheckStore,
        check_digest,
    )
    from orchestrator.storage.baselines import BaselineStore
    from orchestrator.storage.batch_budget import (
        BATCH_ENV,
        BatchBudget,
        SharedBudget,
        Spend,
        estimate_cost,
        over_cap,
    )
    from orchestrator.storage.batch_record import (
        LATEST,
        BatchRecord,
        BatchSpend,
        BatchTicket,
        is_batch_id,
        latest_batch_id,
        read_batch_queue,
        read_batch_record,
        write_batch_queue,
        write_batch_record,
    )
    from orchestrator.storage.budget import BudgetStore, CapsReset, ChargeKind, TicketBudget
    from orchestrator.storage.call_journal import CallJournals, JournaledReply
    from orchestrator.storage.crash_points import CRASH_ENV, CrashPoint, crash_point
    from orchestrator.storage.decisions import VerdictRecord, read_verdict, write_verdict
    from orchestrator.storage.files import FileStorage, writes_checked_by
    from orchestrator.storage.fleet_queue import NotQueued, check_ids, note_queued, queued_ticket
    from orchestrator.storage.intake import IntakeFiles
    from orchestrator.storage.layout import (
        LEDGER_FILE,
        StateLayout,
        VerdictFile,
        is_run_id,
        run_record_paths,
        run_records_by_ticket,
        ticket_of,
        verdict_files,
    )
    from orchestrator.storage.locate import (
        config_path,
        resolve_state_dir,
        state_dir,
        state_dir_problem,
    )
    from orchestrator.storage.notify_outbox import NotifyOutbox, OutboxEntry
    from orchestrator.storage.open import (
        StateStorage,
        close_storages,
        open_configured,
        open_database,
        open_state,
        open_storage,
    )
    from orchestrator.storage.playbook import (
        LazyEntries,
        PlaybookStore,
        builtin_entries,
        is_builtin,
    )
    from orchestrator.storage.protocols import (
        Approvals,
        Budgets,
        DecisionLedger,
        Decisions,
        Locks,
        Runs,
        Storage,
    )
    from orchestrator.storage.published import publish, rotate_log
    from orchestrator.storage.retention import (
        PrunedMark,
        prune_base_checks,
        prune_batch_logs,
        prune_runs,
        read_mark,
    )
    from orchestrator.storage.run_ids import resolve_run_id
    from orchestrator.storage.run_listing import run_headers
    from orchestrator.storage.runs import (
        LatestRuns,
        RunStore,
        interrupts_held,
        read_record_file,
        ticket_lock,
    )
    from orchestrator.storage.ticket_queue import copy_queued_ticket, ticket_files, write_sub_ticket
    from orchestrator.storage.transcripts import read_texts, replies_dir, write_texts
