"""``signs.read_up`` over every line of a long stretch of log, at the speed of one search.

Most lines of a long log hold none of the words a sign, an assertion or a report about
the code needs (``signs``' gates), and such a line decides nothing. One search over the
whole stretch (RE2's automaton where installed, ``re`` elsewhere) finds the lines that
might: those holding a gate word in any case, those an alternative with no word may
match (``signs.rest_forms``, widened), and those a reader sees differently from their
bytes or that ``str.splitlines`` would part (an escape, a carriage return, a form feed,
anything beyond ASCII). Only those are decoded and read, from the last up, by the same
``decide`` as ``read_up``, so the answer is the one ``read_up`` gives on
``reversed(text.splitlines())`` — the search only chooses where to look.

Used when a failed program's tail decided nothing and its lowest root-cause line lies
far above the end (``failure``): the lines below that line are its last words too.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO, Final, Literal

from orchestrator.domain.terminal import plain
from orchestrator.reading.prefilter import _import_re2, _latin1_options, widened
from orchestrator.reading.signs import (
    CODE,
    KILLED_STATUS,
    Recognised,
    gate_words,
    line_decider,
    read_lines_up,
    rest_forms,
)

__all__ = [
    "Stretch",
    "candidate_expression",
    "file_stretches",
    "read_up_bytes",
    "read_up_stretches",
]

# What a reader sees differently from the bytes (ESC, CR), what ``str.splitlines`` parts
# a line at besides LF (VT, FF, FS, GS, RS; NEL and the separators are beyond ASCII), and
# anything beyond ASCII (there the gates do not hold: each pattern is run).
# (A CR before the LF is only the line break: CRLF logs stay cheap.)
_UNUSUAL: Final = rb"[\x0b\x0c\x1b\x1c-\x1e\x80-\xff]|\r[^\n]"
_ANCHOR: Final = re.compile(rb"(?<!\\)[\^$]")


def _spelt(word: str) -> bytes:
    return b"".join(bytes([c]) if chr(c).isalnum() else b"\\x%02x" % c for c in word.encode())


def candidate_expression() -> bytes:
    """One expression (RE2's syntax, and ``re``'s) that matches on every line that may
    decide: a gate word in any case, a word-free alternative widened (look-arounds, word
    boundaries and line anchors dropped: a line's prefix may precede what it anchors),
    or an unusual byte."""
    words = b"|".join(_spelt(word) for word in gate_words())
    rests = []
    for source, ignore_case in rest_forms():
        wide = _ANCHOR.sub(b"", widened(source.encode("ascii")))
        rests.append(b"(?i:" + wide + b")" if ignore_case else b"(?:" + wide + b")")
    return b"|".join((b"(?i:" + words + b")", *rests, _UNUSUAL))


# Compiled when a stretch is first read, not on import (RE2's automaton for every word
# costs tens of milliseconds, and most processes that import the driver read no failure).
@functools.cache
def _candidates() -> Any:
    expression = candidate_expression()
    re2 = _import_re2()
    if re2 is None:
        return re.compile(expression)
    options = _latin1_options(re2)
    options.max_mem = 64 << 20  # the automaton's states for every word, with room
    return re2.compile(expression, options)


# Read from the end in stretches of about this much: a decision near the end (the common
# case) costs one stretch, not the whole window.
CHUNK_BYTES: Final = 1 << 20


# A stretch of whole lines: ``buffer[begin:end]``.
Stretch = tuple[bytes, int, int]


def _candidate_lines(buffer: bytes, begin: int, end: int) -> list[tuple[int, int, int]]:
    """Each line of ``buffer[begin:end]`` the expression matches on: (its start, its end
    without the LF, how many lines lie above it in the stretch)."""
    found: list[tuple[int, int, int]] = []
    pos = counted_to = begin
    line_no = 0
    candidates = _candidates()
    while pos < end:
        match = candidates.search(buffer, pos, end)
        if match is None:
            break
        at = match.start()
        line_start = buffer.rfind(b"\n", begin, at) + 1 or begin
        line_end = buffer.find(b"\n", at, end)
        line_end = end if line_end < 0 else line_end
        line_no += buffer.count(b"\n", counted_to, line_start)
        counted_to = line_start
        found.append((line_start, line_end, line_no))
        pos = line_end + 1
    return found


def _numbered_up(stretches: Iterable[Stretch], ahead: int) -> Iterator[tuple[int, str]]:
    """The candidate lines of ``stretches`` (the last stretch first), last first, each
    numbered as ``str.splitlines`` counts lines (an LF-line that holds another break
    counts as the lines it parts into), from the top of the lowest stretch that holds
    one: only the differences count, so no line below it, nor any stretch until then,
    is counted."""
    base: int | None = None  # the number of the stretch's first line
    for (buffer, begin, end), found in _searched(stretches, ahead):
        if base is None and not found:
            continue
        pieces = [buffer[a:b].decode("utf-8", "replace").splitlines() or [""] for a, b, _ in found]
        if base is None:
            base = 0
        else:  # a stretch above a read one ends with its LF: its lines, as splitlines counts
            base -= buffer.count(b"\n", begin, end) + sum(len(p) - 1 for p in pieces)
        numbers, extra = [], 0  # the lines the candidates above part into beyond one
        for (_, _, line_no), piece in zip(found, pieces, strict=True):
            numbers.append(base + line_no + extra)
            extra += len(piece) - 1
        for first, piece in zip(reversed(numbers), reversed(pieces), strict=True):
            for offset in range(len(piece) - 1, -1, -1):
                yield first + offset, piece[offset]


# Stretches searched at once beyond the first: RE2 lets go of the GIL while it searches,
# so on a machine with a core to spare a long reading takes about half the time. What a
# reading that stops early has searched for nothing is bounded by this many stretches.
SEARCH_AHEAD: Final = 2


def _searched(
    stretches: Iterable[Stretch], ahead: int
) -> Iterator[tuple[Stretch, list[tuple[int, int, int]]]]:
    """Each stretch with its candidate lines, in order. The first is searched here (most
    readings stop in it); the ones above it ``ahead`` at a time on threads (none: here)."""
    upward = iter(stretches)
    first = next(upward, None)
    if first is None:
        return
    yield first, _candidate_lines(*first)
    if ahead < 1:
        yield from ((stretch, _candidate_lines(*stretch)) for stretch in upward)
        return
    with ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="read-up") as pool:
        pending: deque[tuple[Stretch, Future[list[tuple[int, int, int]]]]] = deque()
        for stretch in upward:
            pending.append((stretch, pool.submit(_candidate_lines, *stretch)))
            if len(pending) >= ahead:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def _stretches_of(data: bytes, start: int, end: int, chunk_bytes: int) -> Iterator[Stretch]:
    """``data[start:end]`` (``start`` a line's start) in stretches of whole lines, the
    last first (nothing copied)."""
    hi = end
    while hi > start:
        lo = max(start, hi - chunk_bytes)
        if lo > start:
            lo = data.rfind(b"\n", start, lo) + 1 or start
        yield data, lo, hi
        hi = lo


def file_stretches(
    fh: BinaryIO, start: int, end: int, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[Stretch]:
    """The lines of an open file from ``start`` (a line's start) to ``end``, in stretches
    of whole lines read one at a time, the last first: the memory a reading holds stays
    about ``chunk_bytes`` however long the log (a line longer than that is read whole).
    A stretch's cut first line is read again with the stretch above it."""
    hi, size = end, chunk_bytes
    while hi > start:
        lo = max(start, hi - size)
        fh.seek(lo)
        block = fh.read(hi - lo)
        cut = block.find(b"\n") + 1 if lo > start else 0
        if lo > start and cut in (0, len(block)):
            size *= 2  # no whole line in it: read more
            continue
        yield block, cut, len(block)
        hi, size = lo + cut, chunk_bytes


def read_up_stretches(
    stretches: Iterable[Stretch],
    *,
    exit_code: int | None,
    timed_out: bool,
    ignore: tuple[str, ...] = (),
    search_ahead: int = SEARCH_AHEAD,
) -> Recognised | Literal["code"] | None:
    """``read_up`` over every line of ``stretches`` (whole lines of UTF-8, decoded with
    replacement, the last stretch first; see ``file_stretches``), last first: the same decision, reading only
    the lines that may decide. A line that starts with one of ``ignore`` as a reader sees
    it (the runner's own header and footer) is not read. Pure."""
    if timed_out:
        return CODE
    decide = line_decider(exit_code=exit_code, killed=exit_code == KILLED_STATUS)
    if ignore:
        decide_own = decide

        def decide(line: str) -> Recognised | Literal["code"] | None:
            return None if plain(line).startswith(ignore) else decide_own(line)

    return read_lines_up(_numbered_up(stretches, search_ahead), decide)


def read_up_bytes(
    data: bytes,
    *,
    exit_code: int | None,
    timed_out: bool,
    start: int = 0,
    end: int | None = None,
    ignore: tuple[str, ...] = (),
    chunk_bytes: int = CHUNK_BYTES,
) -> Recognised | Literal["code"] | None:
    """``read_up_stretches`` over ``data[start:end]`` (``start`` a line's start). Pure."""
    stretches = _stretches_of(data, start, len(data) if end is None else end, chunk_bytes)
    return read_up_stretches(stretches, exit_code=exit_code, timed_out=timed_out, ignore=ignore)
