"""Where a long log says why the program stopped, when its last lines do not: the last
``::failure-class::`` line in the scan window, and the regions around its lowest
root-cause lines (the evidence signatures), from the bottom up.

A CI log often ends with megabytes of ordinary output after the failure (the rest of a
test run, a coverage table, a cleanup step). Its tail then says nothing, and the line that
named the failure — ``No space left on device``, ``Could not resolve host``, the
commit-order check's one violation — lies above it. The evidence scan finds the tools'
root-cause lines anywhere in the window; a region is the lines just above such a line (a
tool says why just before it gives up: pip's retries above its "Could not find a
version") through the line and ``REGION_LINES_AFTER`` more.

Used to classify a failure (``execution.engine_stage``) and to give the playbook the
lines it matches (``recovery.playbook.check_output_of``). Reads the log;
writes nothing; pure otherwise.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from orchestrator.domain.log_line import without_prefix
from orchestrator.domain.terminal import plain
from orchestrator.reading.scan import scan_hits
from orchestrator.reading.signs import FAILURE_MARKER

REGION_BYTES: Final = 16 * 1024
REGION_LINES_AFTER: Final = 3
# Only the lowest few: the first failure's consequences come after it, and the cost of
# reading stays bounded however noisy the log.
MAX_REGIONS: Final = 8
# Read from the root-cause line on: the line whole (a tool's JSON report of a failed
# command holds its stderr in one long line) and the lines after it; cut there.
_AFTER_BYTES: Final = 64 * 1024 + REGION_LINES_AFTER * 1024


def root_cause_regions(log_path: Path, scan_bytes: int) -> Iterator[str]:
    """The text around each root-cause line in the last ``scan_bytes`` of the log, the
    lowest first, at most ``MAX_REGIONS``; a region never re-reads the lines of the one
    below it. Raises OSError for an unreadable log."""
    scan = scan_hits(log_path, scan_bytes, words=True)
    covered_from = scan.size
    read = 0
    with log_path.open("rb") as fh:
        for hit in sorted(scan.hits, key=lambda h: h.offset, reverse=True):
            if hit.offset >= covered_from:
                continue  # read already, in the region below it
            if read == MAX_REGIONS:
                return
            read += 1
            start = max(scan.window_start, hit.offset - REGION_BYTES)
            text = _region(fh, start, hit.offset, cut_first=start > 0)
            covered_from = start
            yield text


def _region(fh: BinaryIO, start: int, line_at: int, *, cut_first: bool) -> str:
    """The lines from ``start`` (a cut first line dropped) through the line at
    ``line_at`` and ``REGION_LINES_AFTER`` more."""
    fh.seek(start)
    data = fh.read(line_at - start + _AFTER_BYTES)
    before = data[: line_at - start]
    if cut_first:
        newline = before.find(b"\n")
        before = before[newline + 1 :] if newline >= 0 else b""
    after = data[line_at - start :].split(b"\n")[: 1 + REGION_LINES_AFTER]
    return (before + b"\n".join(after)).decode("utf-8", "replace")


def last_marker(log_path: Path, scan_bytes: int) -> str | None:
    """The last ``::failure-class::`` line in the last ``scan_bytes`` of the log, as a
    reader sees it (after colours and a CI runner's or build tool's prefix), searched
    from the end: each line holding the marker is looked at once, however big the
    window. Raises OSError."""
    with log_path.open("rb") as fh:
        size = fh.seek(0, 2)
        if size == 0:
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            needle = FAILURE_MARKER.encode()
            floor = max(0, size - scan_bytes)
            end = size
            while (at := view.rfind(needle, floor, end)) >= 0:
                start = view.rfind(b"\n", floor, at) + 1
                if start == 0 and floor > 0:
                    return None  # its line starts before the window: cut, not read
                stop = view.find(b"\n", at)
                line = view[start : stop if stop >= 0 else size].decode("utf-8", "replace")
                if without_prefix(plain(line)).startswith(FAILURE_MARKER):
                    return line
                end = start  # the marker inside a line: the lines above it
            return None
