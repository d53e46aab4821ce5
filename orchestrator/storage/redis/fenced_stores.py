"""The stores of one ticket's run, each write asking the ticket's fence first.

Each wraps a store of the shared state dir (the files backend): reads pass through,
every write (the run record, workspace files, a bundle, the hand-off, a fix report, a
verdict file, an approval, a charge to the ticket) calls ``fence.check()`` before it
begins and again right before each of its files lands (``checked_before_replace``), so a
worker that was taken over raises ``FencedOut`` instead of writing over the new holder's
state. The second check is what counts: a worker paused between the first and the rename
(the fsync is the slow part) would otherwise land a stale record after the takeover. The
local mode does not wrap its stores at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from orchestrator.storage._atomic import checked_before_replace
from orchestrator.storage.redis.fence import Fence
from orchestrator.storage.runs import RunStore

if TYPE_CHECKING:
    from datetime import datetime

    from orchestrator.domain.runs import RunRecord
    from orchestrator.storage.approvals import Approval
    from orchestrator.storage.budget import ChargeKind, TicketBudget
    from orchestrator.storage.crash_points import CrashPoint
    from orchestrator.storage.decisions import VerdictRecord
    from orchestrator.storage.layout import VerdictFile

    # Named in quotes in the bases below: for typing only (noqa: ruff reads no base's string).
    from orchestrator.storage.protocols import Approvals, Budgets, Decisions  # noqa: F401

_Store = TypeVar("_Store")


@contextmanager
def _fenced(fence: Fence) -> Iterator[None]:
    """Check now (no work for a worker already taken over) and right before each file
    of the block lands."""
    fence.check()
    with checked_before_replace(fence.check):
        yield


class FencedRunStore(RunStore):
    """The state dir's ``RunStore`` (what ``Services.storage.runs`` is) with every write fenced:
    the run record, workspace files, bundles, the hand-off and fix reports. Reads and
    path helpers are the files store's own."""

    def __init__(self, state_dir: Path, fence: Fence) -> None:
        super().__init__(state_dir)
        self.fence = fence

    def save(self, record: RunRecord, point: CrashPoint | None = None) -> None:
        with _fenced(self.fence):
            super().save(record, point)

    def write_workspace_files(self, run_id: str, files: Mapping[Path, str]) -> None:
        with _fenced(self.fence):
            super().write_workspace_files(run_id, files)

    def write_bundle(self, run_id: str, number: int, text: str) -> Path:
        with _fenced(self.fence):
            return super().write_bundle(run_id, number, text)

    def write_handoff(self, run_id: str, text: str) -> Path:
        with _fenced(self.fence):
            return super().write_handoff(run_id, text)

    def write_mechanical_fix(self, run_id: str, number: int, report: Mapping[str, Any]) -> Path:
        with _fenced(self.fence):
            return super().write_mechanical_fix(run_id, number, report)


class _Fenced(Generic[_Store]):
    """A store of the shared state dir (``inner``) whose writes ask ``fence`` first."""

    def __init__(self, inner: _Store, fence: Fence) -> None:
        self.inner = inner
        self.fence = fence


class FencedDecisions(_Fenced["Decisions"]):
    def path(self, run_id: str, number: int) -> Path:
        return self.inner.path(run_id, number)

    def write(self, record: VerdictRecord) -> Path:
        with _fenced(self.fence):
            return self.inner.write(record)

    def read(self, run_id: str, number: int) -> VerdictRecord:
        return self.inner.read(run_id, number)

    def read_with_sha256(self, run_id: str, number: int) -> tuple[VerdictRecord, str]:
        return self.inner.read_with_sha256(run_id, number)

    def find(self, *, run_id: str | None = None, ticket_id: str | None = None) -> list[VerdictFile]:
        return self.inner.find(run_id=run_id, ticket_id=ticket_id)


class FencedApprovals(_Fenced["Approvals"]):
    """Kept as given, like the files they wrap: the run signs and verifies them
    (``approvals.SignedApprovals``, composed in ``app/stores.py``) with the key of the
    shared state dir (``keys/approval.key`` there, or ``$ORCHESTRATOR_APPROVAL_KEY`` set
    alike on every machine), so an approval a worker or ``approve`` signed verifies on
    any other machine."""

    def path(self, run_id: str, number: int) -> Path:
        return self.inner.path(run_id, number)

    def write(self, approval: Approval) -> None:
        with _fenced(self.fence):
            self.inner.write(approval)

    def read(self, run_id: str, number: int) -> Approval | None:
        return self.inner.read(run_id, number)

    def answered(self, run_id: str, number: int) -> bool:
        return self.inner.answered(run_id, number)


class FencedBudgets(_Fenced["Budgets"]):
    def load(self, ticket_id: str) -> TicketBudget:
        return self.inner.load(ticket_id)

    def charge(
        self, ticket_id: str, kind: ChargeKind, key: str, *, run_id: str, at: datetime
    ) -> TicketBudget:
        with _fenced(self.fence):
            return self.inner.charge(ticket_id, kind, key, run_id=run_id, at=at)
