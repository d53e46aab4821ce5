"""The one flock helper. Every lock under the state dir is an advisory ``flock`` on a lock
file: the kernel releases it when its holder dies, even by SIGKILL, so a crash never
leaves a ticket, a batch budget or the ledger locked."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.domain.errors import TicketLocked


@contextmanager
def flock(
    path: Path, *, exclusive: bool = True, wait: bool = True, missing_ok: bool = False
) -> Iterator[int | None]:
    """Hold a flock on ``path`` (created, with its directory) and yield its descriptor.

    ``wait=False`` raises BlockingIOError instead of waiting for another holder.
    ``missing_ok``: when the lock file cannot be created (a read-only copy of a state dir)
    yield None instead of raising; a reader that only looks can still go on, unlocked."""
    try:
        if not missing_ok:  # a reader must not create the state dir it only looks at
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        if not missing_ok:
            raise
        yield None
        return
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
        yield fd
    finally:
        os.close(fd)  # releases the flock


@contextmanager
def holder_lock(path: Path, ticket_id: str) -> Iterator[None]:
    """An exclusive flock that records the holder's pid in the lock file. Raises
    TicketLocked (naming that pid) instead of waiting: a second ``run`` or an overlapping
    cron batch must skip the ticket, not queue behind it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise TicketLocked(ticket_id, int(holder) if holder.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


class FileLocks:
    """The locks of one state dir."""

    def __init__(self, ticket_lock_path: Callable[[str], Path]) -> None:
        self._ticket_lock_path = ticket_lock_path

    @contextmanager
    def ticket(self, ticket_id: str) -> Iterator[None]:
        """Hold the ticket's lock (see ``holder_lock``)."""
        with holder_lock(self._ticket_lock_path(ticket_id), ticket_id):
            yield
