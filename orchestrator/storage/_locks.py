"""The one flock helper. Every lock under the state dir is an advisory ``flock`` on a lock
file: the kernel releases it when its holder dies, even by SIGKILL, so a crash never
leaves a ticket, a batch budget or the ledger locked."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

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


# How long a process that found the lock held waits for the holder to write its pid: the
# holder writes it right after taking the lock, but a loaded machine may not run it in
# between (the skip line then named "another process").
_HOLDER_WRITES_S: Final = 0.5


def _holder_of(fd: int) -> int | None:
    """The pid the lock's holder wrote, read until it is there (``_HOLDER_WRITES_S`` at
    most, a few milliseconds apart); None when it never is."""
    deadline = time.monotonic() + _HOLDER_WRITES_S
    while True:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if holder.isdigit():
            return int(holder)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


@contextmanager
def holder_lock(path: Path, ticket_id: str) -> Iterator[None]:
    """An exclusive flock that records the holder's pid in the lock file. Raises
    TicketLocked (naming that pid) instead of waiting: a second ``run`` or an overlapping
    cron batch must skip the ticket, not queue behind it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TicketLocked(ticket_id, _holder_of(fd)) from None
        held = True
        # Written over whatever is there, then cut to length: never emptied first, and a
        # reader who meets a torn write reads again (``_holder_of``).
        mine = f"{os.getpid()}\n".encode()
        os.pwrite(fd, mine, 0)
        os.ftruncate(fd, len(mine))
        yield
    finally:
        if held:
            # Our pid goes with our hold: the next holder's is the only one a waiting
            # reader can meet (a process that died holding it leaves its pid: the kernel
            # let go of the lock, and the next holder writes over it).
            os.ftruncate(fd, 0)
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
