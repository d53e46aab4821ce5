"""A run store whose every write asks the ticket's fence first.

Wraps any ``Runs`` (the files store on the shared state dir): reads pass through, each
write (the record, workspace files, a bundle, the hand-off, a fix report) calls
``fence.check()`` first, so a worker that was taken over raises ``FencedOut`` instead of
overwriting the new holder's state. The local mode does not wrap its store at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.distributed.fence import Fence

if TYPE_CHECKING:
    from orchestrator.storage.crash_points import CrashPoint
    from orchestrator.storage.protocols import Runs
    from orchestrator.storage.runs import RunRecord


class FencedRuns:
    def __init__(self, inner: Runs, fence: Fence) -> None:
        self.inner = inner
        self.fence = fence
        self.state_dir: Path = inner.state_dir

    def save(self, record: RunRecord, point: CrashPoint | None = None) -> None:
        self.fence.check()
        self.inner.save(record, point)

    def load(self, run_id: str) -> RunRecord:
        return self.inner.load(run_id)

    def latest_for_ticket(self, ticket_id: str) -> RunRecord | None:
        return self.inner.latest_for_ticket(ticket_id)

    def run_dir(self, run_id: str) -> Path:
        return self.inner.run_dir(run_id)

    def write_workspace_files(self, run_id: str, files: Mapping[Path, str]) -> None:
        self.fence.check()
        self.inner.write_workspace_files(run_id, files)

    def write_bundle(self, run_id: str, number: int, text: str) -> Path:
        self.fence.check()
        return self.inner.write_bundle(run_id, number, text)

    def write_handoff(self, run_id: str, text: str) -> Path:
        self.fence.check()
        return self.inner.write_handoff(run_id, text)

    def write_mechanical_fix(self, run_id: str, number: int, report: Mapping[str, Any]) -> Path:
        self.fence.check()
        return self.inner.write_mechanical_fix(run_id, number, report)
