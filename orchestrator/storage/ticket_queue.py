"""The ticket queue: the directory of ``<ticket-id>.md`` files a person hands the
orchestrator. It is the user's directory, not the state dir; the one thing the
orchestrator writes into it is a split's sub-tickets, beside their parent, so the next
batch over that directory picks them up.

    <sub-ticket-id>.md           a sub-ticket (``<parent-id>.<n>``)
    <sub-ticket-id>.<run-id>.md  the same, when a different file already has that name
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

TICKET_SUFFIX = ".md"


def write_sub_ticket(directory: Path, sub_id: str, text: str, *, run_id: str) -> Path:
    """Write one sub-ticket and return where it went. A redelivered split finds its own
    file and leaves it; a different file of that name (a person's ticket, another run's
    split) is never clobbered: this run's sub-ticket gets the run id in its name."""
    path = directory / f"{sub_id}{TICKET_SUFFIX}"
    if path.exists() and path.read_text() == text:
        return path
    if path.exists():
        path = directory / f"{sub_id}.{run_id}{TICKET_SUFFIX}"
    atomic_write(path, text.encode())
    crash_point(CrashPoint.SUB_TICKET)
    return path


def ticket_files(directory: Path) -> list[Path]:
    """The queue's ticket files, in name order (sub-tickets sort after their parent)."""
    return sorted(p for p in directory.glob(f"*{TICKET_SUFFIX}") if p.is_file())


def copy_queued_ticket(
    root: Path, batch_id: str, ticket_id: str, files: Mapping[PurePosixPath, bytes]
) -> Path:
    """Copy a queued ticket into the state dir (``layout.batch_ticket_dir``), its files
    by their paths relative to the ticket's directory; returns that directory relative to
    the state dir, which is what a worker on another machine is told. With the PostgreSQL
    backend each write is published, so the worker's copy comes from the database."""
    relative = StateLayout(Path(".")).batch_ticket_dir(batch_id, ticket_id)
    for name, data in files.items():
        if name.is_absolute() or ".." in name.parts:
            raise ValueError(f"{name}: not a path inside the ticket's directory")
        atomic_write(root / relative / name, data)
    return relative
