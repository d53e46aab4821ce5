"""A process's log on disk: opened for appending readable by its owner only, and what a
killed reaper leaves beside it. The reaper writes a stage's output into it (capped: head
and tail kept); the runner its header and footer lines around that, and then takes the
secrets the process holds out of it (``redact_held``)."""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
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


def _holds_any(log_path: Path, held: HeldSecrets, keep: int) -> bool:
    with open(log_path, "rb") as log:
        carry = b""
        while chunk := log.read(CHUNK):
            block = carry + chunk
            if held.spans_in(block):
                return True
            carry = block[len(block) - keep :] if keep else b""
    return False


def redact_held(log_path: Path, held: HeldSecrets) -> bool:
    """Every secret the process holds, in every form (``redaction/held.py``), out of a
    kept log once its process has ended: a stage may print a value it was handed, and
    the log stays in the run dir. Only the held values, which one pass in C finds; the
    shape rules, ten times dearer, are applied where a log is read out (the bundle,
    ``show``, the report, the hand-off, the database's copy). Read in blocks, so a
    64 MiB log costs no 64 MiB of memory; written only when something was found, to a
    file beside it that then replaces it (mode 0600, as ``open_log`` makes it). Returns
    whether it changed."""
    if not held or not log_path.is_file():
        return False
    keep = held.longest - 1
    if not _holds_any(log_path, held, keep):
        return False
    fd, temporary = tempfile.mkstemp(prefix=f".{log_path.name}.", dir=log_path.parent)
    try:
        with open(log_path, "rb") as log, os.fdopen(fd, "wb") as out:
            pending = b""
            while True:
                chunk = log.read(CHUNK)
                block = pending + chunk
                spans = held.spans_in(block)
                # What may be the start of a form the block's end cuts waits for the
                # next block, unless a form found already runs past it.
                cut = len(block) if not chunk else max(len(block) - keep, 0)
                for start, end in spans:
                    if start < cut:
                        cut = max(cut, end)
                out.write(_with_marks(block[:cut], [span for span in spans if span[0] < cut]))
                pending = block[cut:]
                if not chunk:
                    break
        os.replace(temporary, log_path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return True


def _with_marks(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    parts: list[bytes] = []
    position = 0
    for start, end in spans:
        parts += (data[position:start], REDACTED.encode())
        position = end
    parts.append(data[position:])
    return b"".join(parts)
