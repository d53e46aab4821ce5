"""Reading a file of lines from the end, and by offset: what lets the ledger and its index
look at the last row, or one row, without reading the file."""

from __future__ import annotations

import os
from collections.abc import Iterator

CHUNK = 8192


def pread(fd: int, size: int, offset: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def line_start(fd: int, end: int) -> int:
    """Offset just after the last newline strictly before ``end`` (0 if none), reading
    backwards in chunks: the cost is the length of one line, not of the file."""
    pos = end
    while pos > 0:
        lo = max(0, pos - CHUNK)
        i = pread(fd, pos - lo, lo).rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        pos = lo
    return 0


def reverse_lines(fd: int, end: int) -> Iterator[bytes]:
    """Complete lines (without newline) before ``end`` (which is 0 or just after a
    newline), last first."""
    pos, carry, step = end, b"", CHUNK
    while pos > 0:
        lo = max(0, pos - step)
        carry = pread(fd, pos - lo, lo) + carry
        pos = lo
        step = min(step * 2, 1 << 20)  # doubling keeps a very long line linear to read
        parts = carry.split(b"\n")  # carry ends with a newline, so parts[-1] == b""
        complete = parts[1:-1] if pos > 0 else parts[:-1]
        yield from reversed(complete)
        carry = parts[0] + b"\n" if pos > 0 else b""
