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

import re
from collections.abc import Iterable, Iterator
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


def _compile() -> Any:
    expression = candidate_expression()
    re2 = _import_re2()
    if re2 is None:
        return re.compile(expression)
    options = _latin1_options(re2)
    options.max_mem = 64 << 20  # the automaton's states for every word, with room
    return re2.compile(expression, options)


_CANDIDATES: Final = _compile()


# Read from the end in stretches of about this much: a decision near the end (the common
# case) costs one stretch, not the whole window.
CHUNK_BYTES: Final = 1 << 20


def _candidate_lines(stretch: bytes) -> list[tuple[int, int, int]]:
    """Each line of ``stretch`` the expression matches on: (its start, its end without
    the LF, how many lines lie before it in the stretch)."""
    found: list[tuple[int, int, int]] = []
    end = len(stretch)
    pos = counted_to = line_no = 0
    while pos < end:
        match = _CANDIDATES.search(stretch, pos, end)
        if match is None:
            break
        at = match.start()
        line_start = stretch.rfind(b"\n", 0, at) + 1
        line_end = stretch.find(b"\n", at, end)
        line_end = end if line_end < 0 else line_end
        line_no += stretch.count(b"\n", counted_to, line_start)
        counted_to = line_start
        found.append((line_start, line_end, line_no))
        pos = line_end + 1
    return found


def _numbered_up(stretches: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """The candidate lines of ``stretches`` (whole lines, the last stretch first), last
    first, each numbered as ``str.splitlines`` counts the lines of them all, from the end
    (the last line is -1): an LF-line that holds another break counts as the lines it
    parts into."""
    below = 0  # the lines below the stretch being read
    last = True
    for stretch in stretches:
        lines = stretch.count(b"\n") + (last and stretch[-1:] not in (b"\n", b""))
        last = False
        extra = 0  # lines the candidates below (in this stretch) part into beyond one
        for line_start, line_end, line_no in reversed(_candidate_lines(stretch)):
            piece = stretch[line_start:line_end].decode("utf-8", "replace")
            pieces = piece.splitlines() or [""]
            under = below + (lines - 1 - line_no) + extra
            for offset in range(len(pieces) - 1, -1, -1):
                yield -(under + len(pieces) - offset), pieces[offset]
            extra += len(pieces) - 1
        below += lines + extra


def _stretches_of(data: bytes, start: int, end: int, chunk_bytes: int) -> Iterator[bytes]:
    """``data[start:end]`` (``start`` a line's start) in stretches of whole lines, the
    last first."""
    hi = end
    while hi > start:
        lo = max(start, hi - chunk_bytes)
        if lo > start:
            lo = data.rfind(b"\n", start, lo) + 1 or start
        yield data[lo:hi]
        hi = lo


def file_stretches(
    fh: BinaryIO, start: int, end: int, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[bytes]:
    """The lines of an open file from ``start`` (a line's start) to ``end``, in stretches
    of whole lines read one at a time, the last first: the memory a reading holds stays
    about ``CHUNK_BYTES`` however long the log."""
    hi, carried = end, b""
    while hi > start:
        lo = max(start, hi - chunk_bytes)
        fh.seek(lo)
        block = fh.read(hi - lo) + carried
        cut = block.find(b"\n") + 1 if lo > start else 0
        if lo > start and cut == 0:
            carried, hi = block, lo  # one line longer than a stretch: read on up
            continue
        carried = block[:cut]
        if block[cut:]:
            yield block[cut:]
        hi = lo
    if carried:
        yield carried


def read_up_stretches(
    stretches: Iterable[bytes],
    *,
    exit_code: int | None,
    timed_out: bool,
    ignore: tuple[str, ...] = (),
) -> Recognised | Literal["code"] | None:
    """``read_up`` over every line of ``stretches`` (whole lines of UTF-8, decoded with
    replacement, the last stretch first), last first: the same decision, reading only
    the lines that may decide. A line that starts with one of ``ignore`` as a reader sees
    it (the runner's own header and footer) is not read. Pure."""
    if timed_out:
        return CODE
    decide = line_decider(exit_code=exit_code, killed=exit_code == KILLED_STATUS)
    if ignore:
        decide_own = decide

        def decide(line: str) -> Recognised | Literal["code"] | None:
            return None if plain(line).startswith(ignore) else decide_own(line)

    return read_lines_up(_numbered_up(stretches), decide)


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
