"""Which ticket file a fleet task may name (issue 40): a worker runs a ticket only when it
is one its batch queued, whatever the message says.

A task names a batch, a ticket and the ticket's file in two parts (its directory and its
name, ``batch/celery/requeue.task_ticket``). It is admitted only as one of:

* **the batch's copy** (the PostgreSQL backend, whose machines share no disk): the
  directory is exactly ``batches/<batch-id>/tickets/<ticket-id>`` relative to the state
  dir, the name one plain file name, and the file, resolved, is still inside that copy;
* **a file the batch listed** (the files backend, on a disk every machine shares): the
  batch's record exists under the state dir, and the file, resolved, is one of those the
  batch wrote into its queue list (``batches/<batch-id>/queue.json``) before it queued
  anything.

Anything else — a batch id or ticket id that is not one, ``..``, a symlink out of the
copy, ``/etc/passwd``, a file of another directory, a batch nobody recorded — is
``NotQueued``: the worker refuses the message before it runs anything.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from orchestrator.storage.batch_record import is_batch_id, read_batch_queue, write_batch_queue
from orchestrator.storage.layout import StateLayout

# A ticket id as tickets spell it (domain/validation.Name).
_TICKET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class NotQueued(Exception):
    """A task names what its batch did not queue: the reason, for the worker's log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_ids(batch_id: str, ticket_id: str) -> None:
    """NotQueued unless both are ids (nothing a path could be built from)."""
    if not is_batch_id(batch_id):
        raise NotQueued(f"{batch_id!r} is not a batch id")
    if not _TICKET_ID.match(ticket_id) or ".." in ticket_id:
        raise NotQueued(f"{ticket_id!r} is not a ticket id")


def note_queued(root: Path, batch_id: str, paths: list[Path]) -> None:
    """Add ``paths`` (resolved) to the batch's queue list, before their tasks are sent:
    what a worker on a shared disk will agree to run for this batch. A batch run again
    under the same id (to collect its answers) keeps what it listed before."""
    layout = StateLayout(root)
    try:
        earlier = read_batch_queue(layout, batch_id)
    except (OSError, ValueError):
        earlier = []
    known = [Path(p) for p in earlier if isinstance(p, str)] if isinstance(earlier, list) else []
    fresh = [p.resolve() for p in paths]
    write_batch_queue(layout, batch_id, [*known, *(p for p in fresh if p not in known)])


def _is_plain_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 1 and parts[0] not in ("", ".", "..") and "/" not in name


def _the_batchs_copy(root: Path, batch_id: str, ticket_id: str, name: str, where: str) -> Path:
    expected = StateLayout(Path(".")).batch_ticket_dir(batch_id, ticket_id).as_posix()
    if PurePosixPath(where).as_posix() != expected:
        raise NotQueued(f"{where!r} is not batch {batch_id}'s copy of ticket {ticket_id}")
    if not _is_plain_name(name):
        raise NotQueued(f"{name!r} is not a file name")
    copy = root / expected
    try:
        inside = copy.resolve(strict=True)
        path = (copy / name).resolve(strict=True)
    except (OSError, RuntimeError):
        raise NotQueued(f"batch {batch_id} has no copy of ticket {ticket_id} ({name})") from None
    batches = (root / StateLayout(Path(".")).batch_dir(batch_id)).resolve()
    if not inside.is_relative_to(batches) or path.parent != inside or not path.is_file():
        raise NotQueued(f"{copy / name} leads out of batch {batch_id}'s copy of the ticket")
    return copy / name


def _listed_by_the_batch(root: Path, batch_id: str, name: str, where: str) -> Path:
    layout = StateLayout(root)
    if not layout.batch_record_path(batch_id).is_file():
        raise NotQueued(f"no batch {batch_id} is recorded in {root}")
    if ".." in PurePosixPath(name).parts or PurePosixPath(name).is_absolute():
        raise NotQueued(f"{name!r} is not a path inside {where}")
    try:
        listed = read_batch_queue(layout, batch_id)
    except (OSError, ValueError):
        raise NotQueued(f"batch {batch_id} left no list of the tickets it queued") from None
    path = Path(where) / name
    if not isinstance(listed, list) or str(path.resolve()) not in listed:
        raise NotQueued(f"{path} is not a ticket batch {batch_id} queued")
    return path


def queued_ticket(root: Path, batch_id: str, ticket_id: str, name: str, where: str) -> Path:
    """The ticket file a task names (``where``/``name``) when its batch queued it (see the
    module docstring), for the state dir at ``root``; else NotQueued saying why."""
    check_ids(batch_id, ticket_id)
    if not PurePosixPath(where).is_absolute():
        return _the_batchs_copy(root, batch_id, ticket_id, name, where)
    return _listed_by_the_batch(root, batch_id, name, where)
