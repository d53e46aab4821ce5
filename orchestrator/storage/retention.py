"""Retention: free the disk a finished run no longer needs (its clone and its logs) and
keep everything that says what was decided (the run record, verdicts, bundles, approvals,
reply texts, hand-off, ticket snapshot) and the ledger. A finished ``--jobs N`` batch's
worker logs go the same way; its record (which runs it touched) and budget stay.

A run is pruned only when it is terminal, last changed before the cut-off, and its
ticket's lock can be taken: a run still going, or a ticket some process is driving right
now, is never touched. Nor is a run still waiting for something, whatever its age
(``kept_because``): one not finished (awaiting approval, running or cut short, deferred),
or a stopped one ``resume`` could go on with (the ticket's latest, ``needs-human`` or
``failed`` for a reason a resume continues from: DRY_RUN, a missing program, a check...),
whose clone holds the work its later stages need; at most one per ticket, since only
the latest run of a ticket is resumed. ``also_resumable`` frees those too (a resume
then has to start again from the clone stage, and says so). The record is read again under that lock. What was removed is
written to ``runs/<run-id>/pruned.json`` after the removal, so a reader (``show``) can
say "log pruned" rather than "log missing".
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.domain.errors import IllegalTransition, StateError, TicketLocked
from orchestrator.domain.lifecycle import RunState, check_resume, is_terminal
from orchestrator.domain.runs import RunRecord
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import BASE_CHECKS_DIR, StateLayout, run_record_paths
from orchestrator.storage.runs import read_record_file, ticket_lock


@dataclass(frozen=True)
class Pruned:
    """One run retention looked at: what it removed (or would), or why it left it."""

    run_id: str
    removed: tuple[Path, ...] = ()
    bytes: int = 0
    skipped: str | None = None  # why it was left, or left half done (unreadable, locked)
    locked: bool = False  # left because a process holds its ticket: the next prune takes it
    kept: str | None = None  # left on purpose: what still needs its clone (``kept_because``)


@dataclass(frozen=True)
class PrunedBatch:
    """One batch whose worker logs retention removed (or would), or why it left them."""

    batch_id: str
    removed: tuple[Path, ...] = ()
    bytes: int = 0
    skipped: str | None = None


@dataclass(frozen=True)
class PrunedMark:
    """``runs/<run-id>/pruned.json``: when retention removed what from a run."""

    pruned_at: str
    removed: tuple[str, ...]
    bytes: int


def disk_bytes(path: Path) -> int:
    """The size of the files under ``path`` (links not followed, each counted once)."""
    try:
        top = path.lstat()
    except OSError:
        return 0
    if not stat.S_ISDIR(top.st_mode):
        return top.st_size
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [*files, *dirs]:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                total += info.st_size
    return total


def _remove(path: Path) -> None:
    """Remove a file, link or tree. A stage may have left read-only directories in its
    clone: their write bit is restored so their contents can go."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return

    def writable_then_retry(func: Callable[..., Any], failed: str, _exc: object) -> None:
        os.chmod(os.path.dirname(failed), stat.S_IRWXU)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, stat.S_IRWXU)
            shutil.rmtree(failed, onerror=writable_then_retry)
        elif os.path.lexists(failed):
            func(failed)

    shutil.rmtree(path, onerror=writable_then_retry)


def read_mark(layout: StateLayout, run_id: str) -> PrunedMark | None:
    """What retention removed from the run, or None (never pruned, or unreadable)."""
    try:
        raw = json.loads(layout.pruned_record_path(run_id).read_bytes())
        return PrunedMark(str(raw["pruned_at"]), tuple(raw["removed"]), int(raw["bytes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def kept_because(record: RunRecord, *, latest: bool) -> str | None:
    """Why a run's clone and logs must stay however old the run is, or None. ``latest``:
    it is its ticket's latest run (only that one is ever resumed). Pure."""
    run_id = record.run_id
    if record.state is RunState.AWAITING_APPROVAL:
        return (
            "awaiting approval; its clone is where the answer is carried out "
            f"(`orchestrator approve {run_id}` or `reject`)"
        )
    if not is_terminal(record.state):
        return f"{record.state}, not finished; the next batch goes on in its clone"
    halt = record.halt
    try:
        check_resume(record.state, halt.reason if halt else None)
    except IllegalTransition:
        return None
    if not latest:
        return None
    why = f"{record.state} ({halt.reason})" if halt else str(record.state)
    return f"{why} and resumable; `orchestrator resume {run_id}` goes on in its clone"


def _latest_runs(records: list[RunRecord]) -> set[str]:
    """The latest run of each ticket among ``records`` (as ``latest_for_ticket`` picks)."""
    latest: dict[str, RunRecord] = {}
    for record in records:
        best = latest.get(record.ticket_id)
        if best is None or record.created_at > best.created_at:
            latest[record.ticket_id] = record
    return {r.run_id for r in latest.values()}


def prune_runs(
    layout: StateLayout,
    cutoff: datetime,
    now: datetime,
    *,
    dry_run: bool,
    also_resumable: bool = False,
) -> Iterator[Pruned]:
    """Every terminal run last changed before ``cutoff`` that still has a clone or logs:
    removed (unless ``dry_run``), or skipped with the reason; a run older than that that
    ``kept_because`` keeps is yielded as kept, with the reason."""
    records: list[tuple[Path, RunRecord]] = []
    for path in run_record_paths(layout.runs_dir):
        try:
            records.append((path, read_record_file(path)))
        except StateError as exc:
            yield Pruned(path.stem, skipped=str(exc))
    latest = _latest_runs([record for _, record in records])
    for path, record in records:
        run_id = path.stem
        if record.updated_at >= cutoff:
            continue
        if not layout.prunable_paths(run_id):
            continue  # pruned before, or never made
        kept = _kept(record, latest, also_resumable=also_resumable)
        if kept is not None:
            yield Pruned(run_id, kept=kept)
            continue
        try:
            with ticket_lock(layout.root, record.ticket_id):
                yield _prune_one(layout, path, now, dry_run=dry_run)
        except TicketLocked as exc:
            holder = f"pid {exc.holder_pid}" if exc.holder_pid else "another process"
            yield Pruned(run_id, skipped=f"{exc.ticket_id} is locked by {holder}", locked=True)


def _kept(record: RunRecord, latest: set[str], *, also_resumable: bool) -> str | None:
    if also_resumable and is_terminal(record.state):
        return None
    return kept_because(record, latest=record.run_id in latest)


def _prune_one(layout: StateLayout, path: Path, now: datetime, *, dry_run: bool) -> Pruned:
    run_id = path.stem
    try:  # under the lock: what was terminal stays terminal, but be sure
        record = read_record_file(path)
    except StateError as exc:
        return Pruned(run_id, skipped=str(exc))
    if not is_terminal(record.state):
        return Pruned(run_id, kept=f"{record.state}, not finished")
    targets = layout.prunable_paths(run_id)
    freed = sum(disk_bytes(p) for p in targets)
    if dry_run:
        return Pruned(run_id, tuple(targets), freed)
    removed: list[Path] = []
    problem = None
    for target in targets:
        try:
            _remove(target)
        except OSError as exc:
            problem = f"cannot remove {target}: {exc.strerror or exc}"
            break
        removed.append(target)
    if removed:
        # What went is recorded even when something else could not go.
        freed -= sum(disk_bytes(p) for p in targets if p not in removed)
        _write_mark(layout, run_id, [p.name for p in removed], freed, now)
    if problem is not None:
        return Pruned(run_id, tuple(removed), freed, skipped=problem)
    return Pruned(run_id, tuple(removed), freed)


def _write_mark(
    layout: StateLayout, run_id: str, names: list[str], freed: int, now: datetime
) -> None:
    earlier = read_mark(layout, run_id)
    mark = {
        "pruned_at": f"{now:%Y-%m-%dT%H:%M:%SZ}",
        "removed": sorted({*(earlier.removed if earlier else ()), *names}),
        "bytes": freed + (earlier.bytes if earlier else 0),
    }
    atomic_write(layout.pruned_record_path(run_id), (json.dumps(mark, indent=2) + "\n").encode())


def prune_base_checks(layout: StateLayout, cutoff: datetime, *, dry_run: bool) -> PrunedBatch:
    """The base checks (result and log, ``base_checks/``) written before ``cutoff``:
    removed (unless ``dry_run``). A cache: a later ticket on a pruned base commit checks
    it again. Returned as one ``PrunedBatch`` named ``base_checks``."""
    root = layout.root / BASE_CHECKS_DIR
    old = []
    for path in sorted(root.rglob("*")) if root.is_dir() else ():
        try:
            if (
                path.is_file()
                and not path.is_symlink()
                and path.stat().st_mtime < cutoff.timestamp()
            ):
                old.append(path)
        except OSError:
            continue
    freed = sum(disk_bytes(p) for p in old)
    if dry_run:
        return PrunedBatch(BASE_CHECKS_DIR, tuple(old), freed)
    return _unlink_all(BASE_CHECKS_DIR, old, freed)


def prune_batch_logs(
    layout: StateLayout, cutoff: datetime, *, dry_run: bool
) -> Iterator[PrunedBatch]:
    """The worker logs, and the copies of the tickets it queued to a fleet that shares no
    disk (``layout.batch_ticket_dir``), of every batch none of whose files was written
    after ``cutoff``: removed (unless ``dry_run``). A batch still going rewrites its record
    after each ticket and its workers write their logs as they go, so it is never that
    old. A batch with no record (one from before records) keeps its logs: they are its
    only trace of which runs it touched."""
    for batch_id in layout.batch_ids():
        logs = layout.batch_worker_logs(batch_id)
        copies = layout.batch_dir(batch_id) / "tickets"
        removable = [*logs, *([copies] if copies.is_dir() else [])]
        record = layout.batch_record_path(batch_id)
        if not removable or not record.is_file():
            continue
        try:
            newest = max(p.stat().st_mtime for p in (record, *logs))
        except OSError as exc:
            yield PrunedBatch(batch_id, skipped=f"cannot read {exc.filename}: {exc.strerror}")
            continue
        if newest >= cutoff.timestamp():
            continue
        freed = sum(disk_bytes(p) for p in removable)
        if dry_run:
            yield PrunedBatch(batch_id, tuple(removable), freed)
            continue
        yield _unlink_all(batch_id, removable, freed)


def _unlink_all(name: str, paths: list[Path], freed: int) -> PrunedBatch:
    """Remove ``paths`` (``freed`` bytes in all) in order, stopping at the first that
    cannot go: what went, and the bytes that did, named ``name``."""
    removed: list[Path] = []
    for path in paths:
        try:
            _remove(path)
        except OSError as exc:
            freed -= sum(disk_bytes(p) for p in paths if p not in removed)
            why = f"cannot remove {path}: {exc.strerror}"
            return PrunedBatch(name, tuple(removed), freed, skipped=why)
        removed.append(path)
    return PrunedBatch(name, tuple(removed), freed)
