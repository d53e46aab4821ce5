"""A process's log on disk: opened for appending readable by its owner only, and what a
killed reaper leaves beside it. The reaper writes a stage's output into it (capped: head
and tail kept); the runner its header and footer lines around that, and then takes the
secrets the process holds out of it (``redact_held``)."""

from __future__ import annotations

import contextlib
import glob
import os
from pathlib import Path

from orchestrator.redaction import REDACTED, HeldSecrets


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


CHUNK = 1 << 20


def same_length_mark(size: int) -> bytes:
    """What a held value's ``size`` bytes become in a kept log: ``[REDACTED]`` stretched
    (``[REDACTED*****]``) or shortened (``[******]``) to the same length, so the log is
    rewritten where it lies, byte for byte, and every other byte keeps its offset."""
    mark = REDACTED.encode()
    if size >= len(mark):
        return mark[:-1] + b"*" * (size - len(mark)) + mark[-1:]
    return b"[" + b"*" * max(size - 2, 0) + b"]" if size >= 2 else b"*" * size


def redact_held(log_path: Path, held: HeldSecrets) -> bool:
    """Every secret the process holds, in every form (``redaction/held.py``), out of a
    kept log once its process has ended: a stage may print a value it was handed, and
    the log stays in the run dir. Only the held values, which one pass in C finds; the
    shape rules, ten times dearer, are applied where a log is read out (the bundle,
    ``show``, the report, the hand-off, the database's copy). Read in blocks, so a
    64 MiB log costs no 64 MiB of memory, and each form found is overwritten where it
    lies by a mark of its length (``same_length_mark``): no second copy of the log is
    made, so none can be left behind by a kill, and a reader never sees the file
    replaced. Returns whether it changed."""
    if not held or not log_path.is_file():
        return False
    keep = held.longest - 1
    changed = False
    with open(log_path, "r+b", buffering=0) as log:
        at = 0  # the file offset of the block's first byte
        pending = b""
        while True:
            chunk = log.read(CHUNK)
            block = pending + (chunk or b"")
            spans = held.spans_in(block)
            for start, end in spans:
                os.pwrite(log.fileno(), same_length_mark(end - start), at + start)
                changed = True
            if not chunk:
                break
            # What may be the start of a form the block's end cuts is read again with
            # the next block, unless a form found already runs past it.
            cut = max(len(block) - keep, 0)
            for start, end in spans:
                if start < cut:
                    cut = max(cut, end)
            pending, at = block[cut:], at + cut
    return changed
