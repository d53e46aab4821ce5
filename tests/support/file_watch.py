"""Wait for what another process writes to a file, woken by the write itself.

A worker's log or a run record is another process's: there is no pipe or socket to wait
on, only the file. A poll on an interval wakes up to its interval late and costs a read
each time; an inotify watch on the file's folder wakes as soon as something there is
written, created or renamed into place, and the condition is read again then.

inotify does not watch folders made after the watch starts, so the condition is also
read at least every ``RECHECK_S``: a safety net, not the wait. Where inotify is missing
(not Linux), that re-check is all there is.
"""

from __future__ import annotations

import ctypes
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

RECHECK_S = 0.5
# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_EVENTS = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE


def _watch(folder: Path) -> int | None:
    """An inotify descriptor watching ``folder`` (or its nearest existing parent), or
    None where inotify cannot be had."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    fd = int(init(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        return None
    where = folder
    while not where.is_dir() and where != where.parent:
        where = where.parent
    if add(fd, os.fsencode(where), _EVENTS) < 0:
        os.close(fd)
        return None
    return fd


def wait_for(
    condition: Callable[[], bool],
    folder: Path,
    what: str,
    *,
    deadline_s: float,
    still_possible: Callable[[], bool] = lambda: True,
    explain: Callable[[], str] = lambda: "",
) -> None:
    """Return once ``condition()`` holds, reading it again whenever something in
    ``folder`` changes. Fails the test, naming ``what`` (and ``explain()``), when
    ``deadline_s`` passes or ``still_possible()`` stops holding (the writer exited)."""
    deadline = time.monotonic() + deadline_s
    fd = _watch(folder)
    try:
        while not condition():
            assert still_possible(), f"{what}: it can no longer happen\n{explain()}"
            left = deadline - time.monotonic()
            assert left > 0, f"{what}: not after {deadline_s} s\n{explain()}"
            if fd is None:
                time.sleep(min(left, RECHECK_S))
                continue
            readable, _, _ = select.select([fd], [], [], min(left, RECHECK_S))
            if readable:
                try:
                    while os.read(fd, 65536):
                        pass  # drain: one wake-up for however many events
                except BlockingIOError:
                    pass
    finally:
        if fd is not None:
            os.close(fd)
