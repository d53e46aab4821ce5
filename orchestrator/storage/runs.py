"""Run state under ``<state_dir>/runs``: one JSON record per run, written atomically after
every transition, plus a per-ticket lock so two processes never drive one ticket.

Names and places come from ``layout.py``:
    runs/<run-id>.json            the run record (``orchestrator/domain/runs.py``)
    runs/<run-id>/ticket/         snapshot of the ticket and the files it refers to
    runs/<run-id>/clone/          the working clone
    runs/<run-id>/logs/           one log per attempt (and per check)
    locks/<ticket-id>.lock        flock held while a process drives the ticket
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator.domain.errors import StateError
from orchestrator.domain.fix_report import FixReport
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.validation import read_model
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage._locks import holder_lock
from orchestrator.storage.crash_points import MACHINE_LOCAL, CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout, is_run_id, run_records_by_ticket
from orchestrator.storage.run_listing import read_record_head


def read_record_file(path: Path) -> RunRecord:
    """Parse and validate one run record; StateError names the path and the reason."""
    record = read_model(path, RunRecord, "run record")
    if record is None:
        raise StateError(f"state error: {path}: no such run record")
    return record


class RunStore:
    """Run records on disk. Small on purpose: a later backend (a queue worker's shared
    store) implements the same methods (``protocols.Runs``). The path helpers name the
    files a run leaves beside its record; they come from the state dir's layout."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.layout = StateLayout(state_dir)
        self.runs_dir = self.layout.runs_dir

    def record_path(self, run_id: str) -> Path:
        return self.layout.record_path(run_id)

    def run_dir(self, run_id: str) -> Path:
        return self.layout.run_dir(run_id)

    def verdict_path(self, run_id: str, number: int) -> Path:
        return self.layout.verdict_path(run_id, number)

    def bundle_path(self, run_id: str, number: int) -> Path:
        return self.layout.bundle_path(run_id, number)

    def mechanical_fix_path(self, run_id: str, number: int | None = None) -> Path:
        """Verdict ``number``'s mechanical-fix report; without a number, the run's latest
        (the name older state dirs have, kept up to date beside the numbered ones)."""
        if number is None:
            return self.layout.mechanical_fix_path(run_id)
        return self.layout.mechanical_fix_report_path(run_id, number)

    def handoff_path(self, run_id: str) -> Path:
        return self.layout.handoff_path(run_id)

    def write_bundle(self, run_id: str, number: int, text: str) -> Path:
        """The evidence decision ``number`` is taken on, before it is taken."""
        path = self.bundle_path(run_id, number)
        atomic_write(path, text.encode())
        crash_point(CrashPoint.BUNDLE)
        return path

    def write_handoff(self, run_id: str, text: str) -> Path:
        path = self.handoff_path(run_id)
        atomic_write(path, text.encode())
        crash_point(CrashPoint.HANDOFF)
        return path

    def write_mechanical_fix(self, run_id: str, number: int, report: Mapping[str, Any]) -> Path:
        """Decision ``number``'s mechanical-fix report, rewritten as the fix goes (the
        plan, then the result): its own file, then the same bytes under the run's
        "latest" name, so readers of either see it."""
        data = json.dumps(report, indent=2).encode()
        path = self.layout.mechanical_fix_report_path(run_id, number)
        atomic_write(path, data)
        atomic_write(self.mechanical_fix_path(run_id), data)
        crash_point(CrashPoint.FIX_REPORT)
        return path

    def read_mechanical_fix(self, run_id: str, number: int | None = None) -> FixReport | None:
        """Verdict ``number``'s mechanical-fix report as last written (without a number,
        the run's latest), or None when there is none; StateError names the file and the
        key when it is not a valid report."""
        path = self.mechanical_fix_path(run_id, number)
        return read_model(path, FixReport, "mechanical-fix report")

    def write_workspace_files(self, run_id: str, files: Mapping[Path, str]) -> None:
        """Files a stage's process reads (an engine's prompt), written into the run's
        workspace before it starts. A path outside the workspace is refused: what an
        engine adapter names must not land anywhere else."""
        workspace = self.run_dir(run_id).resolve()
        for path in files:
            if not path.resolve().is_relative_to(workspace):
                raise StateError(f"state error: {path}: outside the run's workspace {workspace}")
        for path, text in files.items():
            atomic_write(path, text.encode())

    def save(self, record: RunRecord, point: CrashPoint | None = None) -> None:
        """Replace the run's record; ``point`` names the step this write persists (the
        crash-point tests kill the process right after it). A write of a fact of this
        machine alone (``MACHINE_LOCAL``) is not published where the state is shared."""
        with interrupts_held():
            data = record.model_dump_json(indent=2).encode()
        atomic_write(self.record_path(record.run_id), data, mirrored=point not in MACHINE_LOCAL)
        if point is not None:
            crash_point(point)

    def load(self, run_id: str) -> RunRecord:
        if not is_run_id(run_id):
            raise StateError(f"state error: {run_id!r} is not a run id")
        return read_record_file(self.record_path(run_id))

    def latest_for_ticket(self, ticket_id: str) -> RunRecord | None:
        """The ticket's most recent run. Only this ticket's records are read (by name), so
        another ticket's damaged file cannot block it; a damaged record of its own raises
        StateError with the path and the reason rather than being silently passed over."""
        paths = run_records_by_ticket(self.runs_dir, (ticket_id,)).get(ticket_id)
        return read_record_file(_latest_of(ticket_id, paths)) if paths else None

    def latest_runs(self, ticket_ids: Collection[str]) -> LatestRuns:
        """Each ticket's most recent run id, as ``latest_for_ticket`` picks it, from one
        listing of ``runs/`` for all of them (never one per ticket), each record read once
        as plain JSON (no validation: only its ticket and start are looked at). A ticket
        with no run is in neither map; one with a record that cannot be read is in
        ``unreadable`` with the reason (``latest_for_ticket`` raises it)."""
        latest: dict[str, str] = {}
        unreadable: dict[str, str] = {}
        if not ticket_ids:
            return LatestRuns(latest, unreadable)
        for ticket_id, paths in run_records_by_ticket(self.runs_dir, ticket_ids).items():
            try:
                latest[ticket_id] = _latest_of(ticket_id, paths).stem
            except StateError as exc:
                unreadable[ticket_id] = str(exc)
        return LatestRuns(latest, unreadable)


class LatestRuns(NamedTuple):
    """``Runs.latest_runs``'s answer: ticket → its latest run id, and ticket → why one of
    its records could not be read (its latest is then unknown)."""

    run_ids: dict[str, str]
    unreadable: dict[str, str]


_LATEST_KEYS = ("ticket_id", "created_at")


def _latest_of(ticket_id: str, paths: Iterable[Path]) -> Path:
    """The record among ``paths`` (one ticket's, in name order) with the latest
    ``created_at`` as written; on a tie, the first by name. Every one is read: a damaged
    record of the ticket is a StateError, never passed over."""
    best: tuple[str, Path] | None = None
    for path in paths:
        try:
            # Only its ticket and start are wanted: the head of a record as the store
            # writes it (a record cut short, or laid out otherwise, is read whole).
            raw = read_record_head(str(path), _LATEST_KEYS)
        except OSError as exc:
            raise StateError(f"state error: {path}: cannot read: {exc.strerror}") from None
        except ValueError as exc:
            raise StateError(f"state error: {path}: not valid JSON: {exc}") from None
        if not isinstance(raw, dict) or raw.get("ticket_id") != ticket_id:
            raise StateError(f"state error: {path}: not a run record of {ticket_id}")
        created = str(raw.get("created_at", ""))
        if best is None or created > best[0]:
            best = (created, path)
    if best is None:
        raise StateError(f"state error: no run record of {ticket_id}")
    return best[1]


@contextmanager
def ticket_lock(state_dir: Path, ticket_id: str) -> Iterator[None]:
    """Hold an exclusive flock for the ticket; the OS releases it if we crash.
    Raises TicketLocked (naming the holder's pid) instead of waiting."""
    with holder_lock(StateLayout(state_dir).ticket_lock_path(ticket_id), ticket_id):
        yield


@contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then arrive as usual. Serialising a
    record runs inside pydantic's serializer, which turns the Interrupted that the CLI's
    handler raises into a serialization error: an internal error (exit 1) instead of a
    clean stop (exit 130). Held back, the signal lands just after, before the write.

    Python runs a handler in the main thread whichever thread the OS gave the signal to,
    so a mask on this thread alone does not hold it once another thread lives (a worker's
    lease renewer): the OS hands the signal to that thread and the handler still runs
    here, mid-serialisation. So the handlers are swapped for one that notes the signal,
    and what was noted is raised again once the old handlers are back."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers run only in the main thread: none can interrupt this one
        return
    arrived: list[int] = []

    def note(signum: int, frame: object) -> None:
        arrived.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        for noted in dict.fromkeys(arrived):
            signal.raise_signal(noted)
