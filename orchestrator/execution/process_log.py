"""A process's log on disk: opened for appending readable by its owner only, and what a
killed reaper leaves beside it. The reaper writes a stage's output into it (capped: head
and tail kept); the runner its header and footer lines around that."""

from __future__ import annotations

import contextlib
import glob
import os
from pathlib import Path


def open_log(log_path: Path) -> int:
    """The log for appending, readable by its owner only: a stage prints what it sees,
    and what it sees may be secret. An older, wider-open log keeps its content; only its
    mode narrows."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    return fd


def append_log_line(log_path: Path, text: str) -> None:
    """Append ``text`` to a log, creating it readable by its owner only."""
    fd = open_log(log_path)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def remove_tail_segments(log_path: Path, reaper_pid: int) -> None:
    """A reaper that was KILLed leaves its tail segments behind: they go."""
    for leftover in log_path.parent.glob(f".{glob.escape(log_path.name)}.{reaper_pid}.tail-*"):
        with contextlib.suppress(OSError):
            leftover.unlink()
