"""The files backend, the default: one ``FileStorage(state_dir)`` hands out every store.

Each store is imported when first asked for, so a command that reads only the ledger
(``orchestrator ledger show``) does not pay for pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from orchestrator.domain.errors import StateError
from orchestrator.storage._locks import FileLocks
from orchestrator.storage.layout import StateLayout, VerdictFile, ticket_of, verdict_files

if TYPE_CHECKING:
    from orchestrator.domain.config import BatchConfig, PriceConfig
    from orchestrator.storage.approvals import Approval
    from orchestrator.storage.batch_budget import BatchBudget
    from orchestrator.storage.budget import BudgetStore
    from orchestrator.storage.decisions import VerdictRecord
    from orchestrator.storage.ledger import Ledger
    from orchestrator.storage.redis.client import CoordinationStore
    from orchestrator.storage.redis.fleet_stores import FleetStorage
    from orchestrator.storage.runs import RunStore


class VerdictFiles:
    """``runs/<run-id>.verdict-<n>.json``: one per decision, written once."""

    def __init__(self, layout: StateLayout) -> None:
        self._layout = layout

    def path(self, run_id: str, number: int) -> Path:
        return self._layout.verdict_path(run_id, number)

    def write(self, record: VerdictRecord) -> Path:
        from orchestrator.storage.decisions import write_verdict

        path = self.path(record.run_id, record.number)
        write_verdict(path, record)
        return path

    def read(self, run_id: str, number: int) -> VerdictRecord:
        from orchestrator.storage.decisions import read_verdict

        return read_verdict(self.path(run_id, number))

    def sha256(self, run_id: str, number: int) -> str | None:
        """The sha256 of the verdict file's bytes as persisted (what an approval is bound
        to), or None when there is no such file."""
        from orchestrator.storage.approvals import verdict_sha256

        try:
            return verdict_sha256(self.path(run_id, number).read_bytes())
        except FileNotFoundError:
            return None
        except OSError as exc:
            path = self.path(run_id, number)
            raise StateError(f"state error: {path}: cannot read: {exc.strerror}") from None

    def read_with_sha256(self, run_id: str, number: int) -> tuple[VerdictRecord, str]:
        """The decision and the sha256 of the bytes it was read from: hashed before and
        after the read, so the two are of the same file (a change in between is refused)."""
        path = self.path(run_id, number)
        before = self.sha256(run_id, number)
        if before is None:
            raise StateError(f"state error: {path}: no such verdict file")
        record = self.read(run_id, number)
        if self.sha256(run_id, number) != before:
            raise StateError(f"state error: {path}: changed while it was being read")
        return record, before

    def find(self, *, run_id: str | None = None, ticket_id: str | None = None) -> list[VerdictFile]:
        return verdict_files(self._layout.runs_dir, run_id=run_id, ticket_id=ticket_id)


# ``layout.approval_path``'s names, for finding every approval file.
_APPROVAL_NAME = re.compile(r"^(?P<run>.+)\.approval-(?P<n>\d+)\.json$")


class ApprovalFile(NamedTuple):
    """One ``runs/<run-id>.approval-<n>.json`` found on disk."""

    run_id: str
    number: int
    path: Path


class ApprovalFiles:
    """``runs/<run-id>.approval-<n>.json``: the answer to decision n, written once, kept
    as given. Signing and verifying them is ``approvals.SignedApprovals``'s."""

    def __init__(self, layout: StateLayout) -> None:
        self._layout = layout

    def path(self, run_id: str, number: int) -> Path:
        return self._layout.approval_path(run_id, number)

    def write(self, approval: Approval) -> None:
        from orchestrator.storage.approvals import write_approval

        write_approval(self.path(approval.run_id, approval.verdict), approval)

    def read(self, run_id: str, number: int) -> Approval | None:
        from orchestrator.storage.approvals import read_approval

        return read_approval(self.path(run_id, number))

    def answered(self, run_id: str, number: int) -> bool:
        return self.path(run_id, number).exists()

    def find(self) -> list[ApprovalFile]:
        """Every approval file of every run, by run id then decision number; only names
        whose run part is a run id (and whose name is the one the layout gives it)."""
        found = []
        for path in self._layout.runs_dir.glob("*.approval-*.json"):
            match = _APPROVAL_NAME.match(path.name)
            if match is None or ticket_of(match.group("run")) is None or not path.is_file():
                continue
            run_id, number = match.group("run"), int(match.group("n"))
            if self._layout.approval_path(run_id, number) == path:
                found.append(ApprovalFile(run_id, number, path))
        found.sort(key=lambda a: (a.run_id, a.number))
        return found


class FileStorage:
    """Every store of one state dir, as files under it (``layout.py`` names them)."""

    shared_batch_budget = False  # by a fleet: its file's flock excludes no other machine

    def __init__(self, root: Path) -> None:
        self.root = root
        self.layout = StateLayout(root)

    @cached_property
    def runs(self) -> RunStore:
        from orchestrator.storage.runs import RunStore

        return RunStore(self.root)

    @cached_property
    def decisions(self) -> VerdictFiles:
        return VerdictFiles(self.layout)

    @cached_property
    def approvals(self) -> ApprovalFiles:
        return ApprovalFiles(self.layout)

    @cached_property
    def budgets(self) -> BudgetStore:
        from orchestrator.storage.budget import BudgetStore

        return BudgetStore(self.root)

    @cached_property
    def locks(self) -> FileLocks:
        return FileLocks(self.layout.ticket_lock_path)

    def sweep_stale_temps(self) -> list[Path]:
        """Remove the temp files killed atomic writes left under the state dir (never one
        a live process is writing); called when a run or batch opens the state dir."""
        from orchestrator.storage._atomic import sweep_stale_temps

        return sweep_stale_temps(self.layout.write_dirs())

    def forget(self, removed: Iterable[Path]) -> None:
        """Files removed from the state dir (prune) are gone: nothing else keeps them."""

    def ledger(self, key: bytes | None = None) -> Ledger:
        """The decision ledger; ``key`` (from ``ledger.key_from_env``) when it is keyed."""
        from orchestrator.storage.ledger import Ledger

        return Ledger(self.layout.ledger_path, key=key)

    def batch_budget(
        self, batch_id: str, caps: BatchConfig, prices: dict[str, PriceConfig]
    ) -> BatchBudget:
        """One batch's model budget, shared by its workers."""
        from orchestrator.storage.batch_budget import BatchBudget

        return BatchBudget(self.layout.batch_budget_path(batch_id), caps, prices)

    def queued_ticket(self, batch_id: str, ticket_id: str, name: str, where: str) -> Path:
        """The ticket file ``batch_id`` queued (``fleet_queue``); NotQueued if none."""
        from orchestrator.storage.fleet_queue import queued_ticket

        return queued_ticket(self.root, batch_id, ticket_id, name, where)

    @contextmanager
    def fleet_ticket(
        self, coordination: CoordinationStore, ticket_id: str, lease_s: float
    ) -> Iterator[FleetStorage]:
        """``ticket_id``'s stores on a fleet worker: claimed in Redis (a flock would not
        exclude another machine), each write fenced by the claim; else TicketClaimed."""
        from orchestrator.storage.redis.coordination import TicketLeases, claim
        from orchestrator.storage.redis.fleet_stores import FleetStorage

        with claim(TicketLeases(coordination, ttl_s=lease_s), ticket_id) as held:
            yield FleetStorage(self, held, coordination, ticket_id)
