"""The scan: every signature hit in the end window of a log, one per shape, counted.

The window is read in fixed-size chunks into one reused buffer: memory stays flat however
big the window. A hit is kept once per (signature, template), with how many lines had
that shape. Pure apart from reading the file it is given: same file, same hits.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, Final, Protocol

from orchestrator.domain import line_templates, log_line
from orchestrator.domain.line_templates import template_of
from orchestrator.domain.terminal import BARE_CR_BYTES, plain_bytes
from orchestrator.reading import prefix as learned
from orchestrator.reading import ranking
from orchestrator.reading.prefilter import Prefilter
from orchestrator.reading.signature_match import (
    _PREFIX_ONLY,
    _classify,
    _line_starts,
    _named,
    re2_prefilter,
)
from orchestrator.reading.signatures import WORDS, Signature

__all__ = ["CHUNK_BYTES", "Hit", "Scan", "forget_scans", "scan_hits"]

CHUNK_BYTES: Final = 1 << 20
# A line longer than this is not a tool's error line; its start is not carried over a
# chunk boundary (so memory stays flat on a log without newlines).
MAX_LINE_BYTES: Final = 64 * 1024
# Hits are kept one per (signature, template): the first line of each shape, with how
# many lines had it (a warning every file gets is one hit, counted, not a thousand).
# A noisy log must not grow the list without bound: past this many shapes, new ones are
# not kept (the counts of those kept go on).
MAX_DISTINCT: Final = 4096
# Matching lines named in one scan: a log that is one long storm of error lines stops
# being read there (its first lines are the telling ones), which bounds the time.
MAX_MATCHES: Final = 200_000


class WordSearch(Protocol):
    def search(self, text: bytes | bytearray, pos: int, endpos: int) -> _Found | None: ...


class _Found(Protocol):
    def start(self) -> int: ...


@dataclass(frozen=True)
class Hit:
    """A line a signature matched: its number (1 = the first line of the scanned window),
    the file offset of its first byte, and the signature; its template
    (``domain.line_templates``) and how many lines of the window matched with the same one
    (the first of them is the hit)."""

    line: int
    offset: int
    signature: Signature
    template: bytes = b""
    count: int = 1
    text: bytes = b""  # the line (cut), as a reader sees it, after the log's prefix
    score: float = 0.0
    # The log level the log's own prefix gave the line (``ERROR``, ``INFO``), if any.
    level: bytes | None = None


@dataclass(frozen=True)
class Scan:
    hits: tuple[Hit, ...]
    size: int
    window_start: int
    # The log's own prefixes (``reading.prefix``), one per shape its sections share.
    prefixes: tuple[learned.Prefix, ...] = ()


# Read at the window's start to learn the log's prefix from.
PREFIX_SAMPLE_BYTES: Final = 64 * 1024


def _window_prefix(f: io.BufferedReader, first: int, end: int) -> tuple[learned.Prefix, ...]:
    """The log's prefixes (``reading.prefix``), learned from lines at the start, the
    middle and the end of the window as a reader sees them (without a known CI prefix),
    each sample on its own (``prefix.common_prefixes``): a log's sections often have
    their own shapes."""
    samples = []
    size = end - first
    for at in sorted({first, first + size // 2, max(first, end - PREFIX_SAMPLE_BYTES // 3)}):
        f.seek(at)
        data = f.read(min(PREFIX_SAMPLE_BYTES // 3, end - at))
        if at > first:
            data = data[data.find(b"\n") + 1 :]  # the first line is cut
        samples.append(learned_prefix_of(data))
    return learned.common_prefixes(samples)


def learned_prefix_of(data: bytes) -> learned.Prefix | None:
    """The prefix the lines of ``data`` share: its last, cut, line left out."""
    text = log_line.without_columns(plain_bytes(data))
    lines = text.split(b"\n")[:-1] if b"\n" in text else []
    return learned.learn_prefix([_line_of(line, 0, len(line)) for line in lines])


def _new_line_start(f: io.BufferedReader, start: int, end: int) -> int:
    """The offset of the first full line at or after ``start`` (a cut first line is not
    evidence), or ``end`` when there is none within reach."""
    f.seek(start - 1)
    reach = min(end, start - 1 + MAX_LINE_BYTES)
    data = f.read(reach - (start - 1))
    newline = data.find(b"\n")
    return start - 1 + newline + 1 if newline >= 0 else end


def scan_hits(
    path: Path,
    window_bytes: int,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    prefilter: Prefilter | EllipsisType | None = ...,
    words: bool = False,
) -> Scan:
    """Every signature hit in the last ``window_bytes`` of ``path``, one per (signature,
    template) with its count, and, with ``words``, the lines holding error words in the
    window's last ``ranking.VOCABULARY_WINDOW_BYTES``; read in chunks into one reused
    buffer. Raises OSError for a file that cannot be read. ``prefilter`` (by default RE2's,
    where installed) only makes it faster: None gives the same signature hits with ``re``
    alone."""
    if prefilter is ...:
        prefilter = re2_prefilter()
    seen = path.stat()
    if not stat.S_ISREG(seen.st_mode):
        raise IsADirectoryError(f"not a regular file: {path.name}")
    # One failure is read by its class, its bundle and the playbook's view: the same file,
    # unchanged, is scanned once. A file's time has the grain of the kernel's clock, so
    # the key also holds a digest of its ends (a log changes at its end; a small one is
    # digested whole).
    key = (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, _ends_digest(path))
    return _scan_once(key, path, window_bytes, chunk_bytes, prefilter, words)


_DIGESTED_END_BYTES: Final = 64 * 1024


def _ends_digest(path: Path) -> bytes:
    with path.open("rb") as f:
        head = f.read(_DIGESTED_END_BYTES)
        size = f.seek(0, io.SEEK_END)
        f.seek(max(len(head), size - _DIGESTED_END_BYTES))
        tail = f.read(_DIGESTED_END_BYTES)
    return hashlib.blake2b(head + b"\0" + tail, digest_size=16).digest()


def forget_scans() -> None:
    """Drop the scans kept (a benchmark times the scan itself)."""
    _scan_once.cache_clear()


@functools.lru_cache(maxsize=8)
def _scan_once(
    key: tuple[int, int, int, int, bytes],
    path: Path,
    window_bytes: int,
    chunk_bytes: int,
    prefilter: Prefilter | None,
    words: bool,
) -> Scan:
    with path.open("rb") as raw:
        f = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
        size = f.seek(0, io.SEEK_END)
        window_start = max(0, size - window_bytes)
        first = _new_line_start(f, window_start, size) if window_start > 0 else 0
        f.seek(first)
        search, reach = ranking.vocabulary()
        words_from = max(first, size - reach) if words else None
        log_prefixes = _window_prefix(f, first, size) if words else ()
        f.seek(first)
        hits = _scan(f, first, size, chunk_bytes, prefilter, search, words_from, log_prefixes)  # type: ignore[arg-type]
        return Scan(hits, size, window_start, log_prefixes)


class _LineCounter:
    """Line numbers by file offset, counted only as far as the last hit asked for: the
    newlines after the last hit are never counted (counting them all costs as much as a
    fifth of the scan). The bytes between the buffer and the last counted offset, gone
    from the buffer, are read again from the file."""

    def __init__(self, fd: int, first: int) -> None:
        self._fd = fd
        self._offset = first  # counted up to here (file offset)
        self._line = 1  # the number of the line the byte at ``_offset`` belongs to

    def line_at(self, offset: int, buf: bytearray, buf_offset: int) -> int:
        """The number of the line starting at ``offset``; ``buf[0]`` holds the byte at
        ``buf_offset`` (or a placeholder that is not a newline)."""
        while self._offset < buf_offset:
            block = os.pread(self._fd, min(CHUNK_BYTES, buf_offset - self._offset), self._offset)
            if not block:
                break  # the file shrank under us: count what is in the buffer
            self._line += block.count(b"\n")
            self._offset += len(block)
        self._line += buf.count(b"\n", self._offset - buf_offset, offset - buf_offset)
        self._offset = offset
        return self._line


def _drawn(buf: bytearray, filled: int) -> bool:
    """Whether ``buf[:filled]`` holds an escape sequence, a redrawn line (a carriage
    return that does not end a CRLF line break) or gh's job and step columns: three
    ``memchr`` on a plain chunk."""
    if buf.find(b"\x1b", 0, filled) >= 0:
        return True
    if buf.find(b"\r", 0, filled) >= 0 and BARE_CR_BYTES.search(buf, 0, filled) is not None:
        return True
    return log_line.has_columns(buf, 0, filled)


class _Plain:
    """A chunk as a reader sees it (``terminal.plain_bytes``, and without gh's job and
    step columns: the tool's line starts after them), and the way back from a line's start
    there to the same line's start in the chunk: what is removed (escape sequences, stale
    frames, columns) holds no newline, so the n-th line of one is the n-th line of the
    other. Asked in ascending order (as the matches come), each newline is stepped over
    once."""

    def __init__(self, buf: bytearray, filled: int) -> None:
        self.text = log_line.without_columns(plain_bytes(bytes(buf[:filled])))
        self._buf = buf
        self._at_text = 0
        self._at_chunk = 0

    def line_start_in_chunk(self, pos: int) -> int:
        newlines = self.text.count(b"\n", self._at_text, pos)
        at = self._at_chunk
        for _ in range(newlines):
            at = self._buf.find(b"\n", at) + 1
        self._at_text, self._at_chunk = pos, at
        return at


def _line_of(text: bytes | bytearray, pos: int, end: int) -> bytes:
    """The line starting at ``pos`` (as much of it as a template reads), without its CI
    prefix: what its template is taken of, and what it is ranked by."""
    reach = min(end, pos + line_templates.MAX_LINE_BYTES)
    stop = text.find(b"\n", pos, reach)
    line = bytes(text[pos : stop if stop >= 0 else reach])
    prefix = _PREFIX_ONLY.match(line)
    return line[prefix.end() :] if prefix else line


def _word_line_starts(
    text: bytes | bytearray, pos: int, end: int, words: WordSearch
) -> Iterator[int]:
    """The starts of the lines in ``text[pos:end]`` that hold an error word, in order."""
    while (found := words.search(text, pos, end)) is not None:
        yield text.rfind(b"\n", 0, found.start()) + 1
        newline = text.find(b"\n", found.start(), end)
        if newline < 0:
            return
        pos = newline + 1


def _merged(a: Iterator[int], b: Iterator[int]) -> Iterator[tuple[int, bool]]:
    """Two ascending streams of line starts as one, each start once: (start, whether a
    signature matched it)."""
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x <= y):
            assert x is not None
            yield x, True
            if y == x:
                y = next(b, None)
            x = next(a, None)
        else:
            yield y, False
            y = next(b, None)


def _scan(
    f: io.BufferedReader,
    first: int,
    end: int,
    chunk_bytes: int,
    prefilter: Prefilter | None,
    words: WordSearch | None = None,
    words_from: int | None = None,
    prefixes: tuple[learned.Prefix, ...] = (),
) -> tuple[Hit, ...]:
    """Every distinct (signature, template) hit of the window, the first line of each
    with how many lines matched alike; lines holding error words (``words``) are read
    from file offset ``words_from`` on. A line that starts with one of ``prefixes``, the
    log's own (``reading.prefix``): a line holding error words is named by the
    signature its text after them matches, and ranked by that text."""
    classified = 0
    # line, offset, signature, template, count, message, level: the count grows in place
    found: dict[tuple[str, bytes], list[Any]] = {}
    lines = _LineCounter(f.fileno(), first)
    buf = bytearray(chunk_bytes + MAX_LINE_BYTES + 2)
    view = memoryview(buf)
    # buf[0] is the newline that ends the line before the window's first line: every line
    # in the buffer is then preceded by a newline, as the joined pattern requires.
    buf[0] = 0x0A
    filled = 1
    buf_offset = first - 1  # file offset of buf[0]
    remaining = end - first

    def done() -> tuple[Hit, ...]:
        return tuple(
            Hit(line, offset, signature, template, count, text, 0.0, level)
            for line, offset, signature, template, count, text, level in found.values()
        )

    while True:
        want = min(chunk_bytes, remaining)
        got = f.readinto(view[filled : filled + want]) if want else 0
        remaining -= got
        filled += got
        at_end = remaining <= 0 or got == 0
        if at_end and buf[filled - 1] != 0x0A:
            # The last line ends at the end of the file as if it had its newline (a
            # signature may look ahead for the end of the line).
            buf[filled] = 0x0A
            filled += 1
        last_newline = filled if at_end else buf.rfind(b"\n", 0, filled)
        # Matched as a reader sees it: a chunk with colours, redrawn lines or gh columns is
        # matched in its plain form, each line found there is then placed in the chunk itself.
        seen = _Plain(buf, filled) if _drawn(buf, filled) else None
        text, text_end = (seen.text, len(seen.text)) if seen is not None else (buf, filled)
        text_last_newline = last_newline
        if seen is not None and not at_end:
            text_last_newline = seen.text.rfind(b"\n")
        starts: Iterator[tuple[int, bool]] = (
            (pos, True) for pos in _line_starts(text, 0, text_end, prefilter)
        )
        if words is not None and words_from is not None and buf_offset + filled > words_from:
            starts = _merged(
                _line_starts(text, 0, text_end, prefilter),
                _word_line_starts(text, 1, text_end, words),
            )
        # A match may take in the newline that starts the next line: each search starts
        # right after the last match's own newline.
        for pos, signed in starts:
            if pos > text_last_newline:
                break  # its line continues in the next chunk: seen again there
            classified += 1
            if classified > MAX_MATCHES:
                return done()  # a storm: what we have is the start of it
            line = _line_of(text, pos, text_end)
            if not signed and not line.strip():
                continue
            signature = _classify(text, pos, text_end) if signed else WORDS
            key = (signature.name, template_of(line))
            known = found.get(key)
            if known is not None:
                known[4] += 1
                continue
            if len(found) >= MAX_DISTINCT:
                continue
            head, message = learned.split_prefix(line, prefixes)
            if not signed and head:
                signature = _named(message)
            offset = buf_offset + (seen.line_start_in_chunk(pos) if seen is not None else pos)
            found[key] = [
                lines.line_at(offset, buf, buf_offset),
                offset,
                signature,
                key[1],
                1,
                message,
                learned.level_of(head) if head else None,
            ]
        if at_end:
            return done()
        if 0 <= last_newline and filled - last_newline <= MAX_LINE_BYTES:
            # Carry the unfinished last line, with the newline before it.
            carry = filled - last_newline
            buf[:carry] = buf[last_newline:filled]
            buf_offset += last_newline
            filled = carry
        else:
            # The unfinished line is too long to be evidence: keep none of it (its start
            # is never seen, the lines after it are). A placeholder byte that is not a
            # newline stands for its last byte, so no line start is invented.
            buf_offset += filled - 1
            buf[0:1] = b"\x00"
            filled = 1
