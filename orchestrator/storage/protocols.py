"""What the rest of the orchestrator may ask of its state, and nothing about where it is.

The files backend (``files.FileStorage``) is the default and the only one today. A queue
worker's shared store (a database, a bucket) implements these same protocols; the use
cases in ``app/`` depend on them, not on paths.

    Runs           run records: save after every transition, load, latest of a ticket
                   (or of many tickets at once)
    Decisions      verdict files: one per decision, written once, found by run or ticket
    Approvals      the answer to a decision, written once (signed: approvals.py)
    Budgets        per-ticket charges, keyed so a re-executed decision never pays twice
    Locks          one driver per ticket at a time; the holder's death releases it
    DecisionLedger the append-only, hash-chained ledger and its indexed history
    Storage        all of them for one state dir: what ``Services`` holds
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.storage.approvals import ApprovalStore

if TYPE_CHECKING:
    from orchestrator.domain.fix_report import FixReport
    from orchestrator.domain.runs import RunRecord
    from orchestrator.storage.budget import ChargeKind, TicketBudget
    from orchestrator.storage.crash_points import CrashPoint
    from orchestrator.storage.decisions import VerdictRecord
    from orchestrator.storage.layout import StateLayout, VerdictFile
    from orchestrator.storage.ledger import (
        ActionHistory,
        LedgerRow,
        RecordedOutcome,
        RepairResult,
        VerifyResult,
    )
    from orchestrator.storage.runs import LatestRuns


class Runs(Protocol):
    state_dir: Path
    layout: StateLayout  # the names of a run's files beside its record, in its workspace

    def record_path(self, run_id: str) -> Path: ...

    def verdict_path(self, run_id: str, number: int) -> Path: ...

    def save(self, record: RunRecord, point: CrashPoint | None = None) -> None: ...

    def load(self, run_id: str) -> RunRecord: ...

    def latest_for_ticket(self, ticket_id: str) -> RunRecord | None: ...

    def latest_runs(self, ticket_ids: Collection[str]) -> LatestRuns:
        """Each ticket's latest run id (as ``latest_for_ticket`` picks it), found for all
        of them at once: one listing, one query; a ticket with a damaged record is in
        ``unreadable``."""
        ...

    def run_dir(self, run_id: str) -> Path:
        """The run's workspace (ticket snapshot, clone, logs): always a local directory,
        since stages run in it."""
        ...

    def write_workspace_files(self, run_id: str, files: Mapping[Path, str]) -> None:
        """Files a stage's process reads, written into the run's workspace."""
        ...

    def write_bundle(self, run_id: str, number: int, text: str) -> Path: ...

    def write_handoff(self, run_id: str, text: str) -> Path: ...

    def write_mechanical_fix(self, run_id: str, number: int, report: Mapping[str, Any]) -> Path:
        """One report per decision; the run's latest also under its older single name."""
        ...

    def read_mechanical_fix(self, run_id: str, number: int | None = None) -> FixReport | None:
        """Decision ``number``'s report as last written (without one, the run's latest)."""
        ...


class Decisions(Protocol):
    def path(self, run_id: str, number: int) -> Path: ...

    def write(self, record: VerdictRecord) -> Path:
        """Write once: a second write of the same decision keeps the first."""
        ...

    def read(self, run_id: str, number: int) -> VerdictRecord: ...

    def read_with_sha256(self, run_id: str, number: int) -> tuple[VerdictRecord, str]:
        """The decision and the sha256 of the very bytes it was read from: what an
        approval is bound to."""
        ...

    def find(self, *, run_id: str | None = None, ticket_id: str | None = None) -> list[VerdictFile]:
        """By run id, then decision number."""
        ...


# Kept as given (written once; read as stored, unverified): ``approvals.SignedApprovals``
# signs what is written and verifies what is read before anything is carried out.
Approvals = ApprovalStore


class Budgets(Protocol):
    def load(self, ticket_id: str) -> TicketBudget: ...

    def charge(
        self, ticket_id: str, kind: ChargeKind, key: str, *, run_id: str, at: datetime
    ) -> TicketBudget: ...


class Locks(Protocol):
    def ticket(self, ticket_id: str) -> AbstractContextManager[None]:
        """Held while one process drives the ticket; raises TicketLocked, never waits."""
        ...


class DecisionLedger(Protocol):
    def append(self, row: LedgerRow) -> dict[str, Any]:
        """Append ``row``; return it as stored, with its seq and hashes."""
        ...

    def append_outcome(
        self, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> dict[str, Any]: ...

    def rows(self) -> Iterator[dict[str, Any]]: ...

    def recent(self, n: int) -> list[dict[str, Any]]: ...

    def rows_of(self, decision_id: str) -> list[dict[str, Any]]:
        """Every row of one decision, oldest first, without reading the whole ledger."""
        ...

    def history(self, signature: str) -> dict[str, ActionHistory]:
        """Per action: the outcomes recorded for decisions about this failure signature."""
        ...

    def recent_outcomes(self, signature: str, last: int) -> dict[str, list[RecordedOutcome]]:
        """Per action: the latest ``last`` outcomes for this failure signature."""
        ...

    def verify(self) -> VerifyResult: ...

    def repair(self) -> RepairResult: ...


class Storage(Protocol):
    """Every store of one state dir, handed out by one object: the files backend
    (``files.FileStorage``) or a fleet worker's, fenced by its claim. What ``Services``
    holds: the use cases ask it for each store, with no fallback of their own."""

    @property
    def root(self) -> Path:
        """The state dir (stages run in its run directories, which are always local)."""
        ...

    @property
    def runs(self) -> Runs: ...

    @property
    def decisions(self) -> Decisions: ...

    @property
    def approvals(self) -> Approvals: ...

    @property
    def budgets(self) -> Budgets: ...

    @property
    def locks(self) -> Locks: ...

    def ledger(self, key: bytes | None = None) -> DecisionLedger:
        """The decision ledger; ``key`` (from ``ledger.key_from_env``) when it is keyed."""
        ...
