"""Evidence: the root-cause lines of a long log, as excerpts within a byte budget.

The end of a log is often ordinary output (the rest of a test run, a summary, a cleanup)
and the line that says what went wrong — the assertion, the F401, the first mypy error,
``No matching distribution`` — lies far above it. The scan (``reading.scan``) finds the
lines that tools print when something fails (``reading.signatures``) in a bounded window
at the end of the log; this module ranks them and returns them as excerpts with their
line numbers and a few lines of context: the hits are read back by seeking, with their
context, redacted, and cut to the byte budget.

Pure apart from reading the file it is given: same file, same excerpts.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from orchestrator.domain import log_line
from orchestrator.domain.terminal import plain_bytes
from orchestrator.reading import ranking
from orchestrator.reading.scan import CHUNK_BYTES, MAX_LINE_BYTES, Hit, scan_hits
from orchestrator.reading.signatures import WORDS
from orchestrator.redaction import redact_bytes

__all__ = [
    "CONTEXT_LINES",
    "Evidence",
    "EvidenceExcerpt",
    "extract_evidence",
    "render_evidence",
]

MAX_EXCERPTS: Final = 8
# Lines one excerpt may span: a block of a hundred alike error lines is shown by the best
# of them and its neighbours, not whole (it would crowd out every other excerpt).
MAX_EXCERPT_LINES: Final = 15
# Lines shown around a matched line (each side).
CONTEXT_LINES: Final = 3
# Each shown line is cut to this many bytes: one minified line must not eat the budget.
MAX_SHOWN_LINE_BYTES: Final = 400
# Read around a hit when building its excerpt: a whole line of the longest kept, plus a
# margin so a secret near the excerpt is redacted whole.
_READ_AROUND_BYTES: Final = MAX_LINE_BYTES

_ERROR_LEVELS: Final = frozenset({b"ERROR", b"FATAL", b"CRITICAL"})


@dataclass(frozen=True)
class EvidenceExcerpt:
    """Lines ``first_line``..``last_line`` of the scanned window, redacted, each shown with
    its number; ``signatures`` names what matched in it, most telling first."""

    first_line: int
    last_line: int
    signatures: tuple[str, ...]
    rank: int
    text: str
    # Its matched lines alone: the lines around them are in the log's tail, sent too.
    bare: bool = False
    score: float = 0.0
    # Why its best line ranks where it does (``ranking.reasons``).
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    excerpts: tuple[EvidenceExcerpt, ...]
    size: int
    window_start: int
    hits: int
    note: str | None = None
    # A cause stated outright is among the excerpts (``ranking.CONFIDENT_SCORE``): the
    # log's tail may then be cut to its last words.
    confident: bool = False


@dataclass
class _Group:
    first: int
    last: int
    hits: list[Hit]


def _groups(hits: tuple[Hit, ...], max_excerpts: int, context: int) -> list[_Group]:
    """The best hits (score, then first seen) with their context ranges, merged where
    they overlap or touch; at most ``max_excerpts`` groups."""
    groups: list[_Group] = []
    for hit in sorted(hits, key=lambda h: (-h.score, h.line)):
        lo, hi = max(1, hit.line - context), hit.line + context
        joined = next((g for g in groups if lo <= g.last + 1 and hi >= g.first - 1), None)
        if joined is not None:
            first, last = min(joined.first, lo), max(joined.last, hi)
            if last - first + 1 <= MAX_EXCERPT_LINES:
                joined.first, joined.last = first, last
                joined.hits.append(hit)
            elif joined.first <= hit.line <= joined.last:
                joined.hits.append(hit)  # shown already: marked, the excerpt not grown
            # else: a lesser line next to a full excerpt (a block of alike lines)
            continue
        if len(groups) >= max_excerpts:
            continue
        groups.append(_Group(lo, hi, [hit]))
    # A group that grew may now touch another: merge until stable (few groups).
    merged = True
    while merged:
        merged = False
        for a in groups:
            for b in groups:
                if (
                    a is not b
                    and a.first <= b.last + 1
                    and b.first <= a.last + 1
                    and max(a.last, b.last) - min(a.first, b.first) < MAX_EXCERPT_LINES
                ):
                    a.first, a.last = min(a.first, b.first), max(a.last, b.last)
                    a.hits.extend(b.hits)
                    groups.remove(b)
                    merged = True
                    break
            if merged:
                break
    return groups


# In a long line, where a failure is stated: a word that says so, then a colon (a tool's
# JSON report holds the failing command's stderr in one line: ansible's ``fatal: …
# "stderr": "… rmtree failed: [Errno 30] Read-only file system …"``).
_STATED_IN_LINE: Final = re.compile(
    rb"(?i)\b(?:error|errno|exception|fail(?:ed|ure)?|fatal|denied|refused|panic)\b[^\s:]{0,12}:"
)
# What of a long line is shown: its start, and the window around the last place it states
# a failure past that start.
_HEAD_SHOWN_BYTES: Final = 240
_BEFORE_STATED_BYTES: Final = 120
_AFTER_STATED_BYTES: Final = 280


def _clip(line: bytes) -> bytes:
    if len(line) <= MAX_SHOWN_LINE_BYTES:
        return line
    cut = "…".encode()
    last = None
    for stated in _STATED_IN_LINE.finditer(line, _HEAD_SHOWN_BYTES):
        last = stated
    if last is None:
        return line[:MAX_SHOWN_LINE_BYTES] + cut
    start = max(_HEAD_SHOWN_BYTES, last.start() - _BEFORE_STATED_BYTES)
    end = last.start() + _AFTER_STATED_BYTES
    return line[:_HEAD_SHOWN_BYTES] + cut + line[start:end] + (cut if end < len(line) else b"")


def _read_group(f: io.BufferedReader, group: _Group, end: int) -> tuple[int, list[bytes], int]:
    """(number of the first line returned, the lines, the first line's byte offset)
    around ``group``'s hits."""
    anchor = min(group.hits, key=lambda h: h.line)
    lowest = max(group.hits, key=lambda h: h.line)
    start = max(0, anchor.offset - _READ_AROUND_BYTES)
    stop = min(end, lowest.offset + _READ_AROUND_BYTES)
    f.seek(start)
    data = f.read(stop - start)
    # Lines before the anchor, counted backwards from its line start.
    head = data[: anchor.offset - start]
    before_lines = head.split(b"\n")[:-1] if head.endswith(b"\n") else []
    if start > 0 and before_lines:
        before_lines = before_lines[1:]  # the first may be cut
    want_before = anchor.line - group.first
    shown_before = before_lines[-want_before:] if want_before else []
    after = data[anchor.offset - start :].split(b"\n")
    if stop < end and len(after) > 1:
        after = after[:-1]  # the last may be cut
    elif stop == end and after and not after[-1]:
        after = after[:-1]  # the file's final newline ends a line, it starts none
    want_after = group.last - anchor.line + 1
    lines = [line.rstrip(b"\r") for line in shown_before + after[:want_after]]
    first_offset = anchor.offset - sum(len(line) + 1 for line in shown_before)
    return anchor.line - len(shown_before), lines, first_offset


def _render_group(numbered: list[tuple[int, bytes]], marked: set[int]) -> str:
    raw = log_line.without_columns(plain_bytes(b"\n".join(line for _, line in numbered)))
    redacted = redact_bytes(raw).split("\n")
    if len(redacted) != len(numbered):
        # A secret spanning lines was redacted: the numbering no longer lines up per line.
        return "\n".join(f"     | {text}" for text in redacted)
    width = len(str(numbered[-1][0] + 1))
    out = []
    for (number, _), text in zip(numbered, redacted, strict=True):
        mark = ">" if number in marked else " "
        clipped = _clip(text.encode("utf-8", errors="replace")).decode("utf-8", "ignore")
        out.append(f"{mark}{number:>{width}}| {clipped}")
    return "\n".join(out)


def extract_evidence(
    path: Path,
    *,
    window_bytes: int,
    max_bytes: int,
    max_excerpts: int = MAX_EXCERPTS,
    context_lines: int = CONTEXT_LINES,
    chunk_bytes: int = CHUNK_BYTES,
    tail_from: int | None = None,
    known: Callable[[bytes], bool] | None = None,
) -> Evidence:
    """The root-cause excerpts of the log at ``path``: most telling first, each with its
    line numbers, at most ``max_excerpts`` of them and ``max_bytes`` in all (rendered).
    ``tail_from``: the byte offset from which the log is sent whole beside the evidence
    (its tail); an excerpt that lies there shows its matched lines alone, as pointers,
    rather than send its context twice. ``known``: whether a green run of the same check
    printed a template (a baseline); None when there is none. Raises OSError for an
    unreadable file."""
    scan = scan_hits(path, window_bytes, chunk_bytes=chunk_bytes, words=True)
    # A level is told apart only in a log that uses several: one that logs everything at
    # DEBUG (mock) says nothing by it.
    levelled = any(hit.level in _ERROR_LEVELS for hit in scan.hits)
    scored = tuple(
        replace(
            hit,
            score=ranking.score(
                hit.signature.rank,
                hit.text,
                count=hit.count,
                known=known(hit.template) if known is not None else None,
                words_only=hit.signature is WORDS,
                level=hit.level if levelled else None,
            ),
        )
        for hit in scan.hits
    )
    # A line worth nothing (a tally of no errors, a line every green run prints) is not
    # evidence at all.
    groups = _groups(tuple(h for h in scored if h.score > 0), max_excerpts, context_lines)
    excerpts: list[EvidenceExcerpt] = []
    with path.open("rb") as raw:
        f = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
        for group in groups:
            first_line, lines, first_offset = _read_group(f, group, scan.size)
            marked = {h.line for h in group.hits}
            numbered = list(enumerate(lines, start=first_line))
            bare = tail_from is not None and first_offset >= tail_from
            if bare:
                numbered = [(n, line) for n, line in numbered if n in marked]
            ranked = sorted(group.hits, key=lambda h: (-h.score, h.line))
            names = tuple(dict.fromkeys(h.signature.name for h in ranked))
            best = ranked[0]
            why = ranking.reasons(
                best.text,
                count=best.count,
                known=known(best.template) if known is not None else None,
                words_only=best.signature is WORDS,
            )
            excerpts.append(
                EvidenceExcerpt(
                    first_line=numbered[0][0],
                    last_line=numbered[-1][0],
                    signatures=names,
                    rank=ranked[0].signature.rank,
                    text=_render_group(numbered, marked),
                    bare=bare,
                    score=ranked[0].score,
                    reasons=why,
                )
            )
    excerpts.sort(key=lambda e: (-e.score, e.first_line))
    kept, used = [], 0
    for excerpt in excerpts:
        cost = len(_excerpt_block(excerpt).encode())
        if used + cost > max_bytes:
            continue
        kept.append(excerpt)
        used += cost
    note = None
    if scan.window_start > 0:
        note = (
            f"scanned the last {_mib(scan.size - scan.window_start)} of {_mib(scan.size)}; "
            "line numbers count from the first full line of that window"
        )
    confident = any(e.score >= ranking.CONFIDENT_SCORE for e in kept)
    return Evidence(tuple(kept), scan.size, scan.window_start, len(scan.hits), note, confident)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _excerpt_block(excerpt: EvidenceExcerpt) -> str:
    span = (
        f"line {excerpt.first_line}"
        if excerpt.first_line == excerpt.last_line
        else f"lines {excerpt.first_line}-{excerpt.last_line}"
    )
    why = f"; {', '.join(excerpt.reasons)}" if excerpt.reasons else ""
    where = "; around it: the log's tail" if excerpt.bare else ""
    return f"--- {span} ({', '.join(excerpt.signatures)}{why}{where}) ---\n{excerpt.text}\n"


def render_evidence(evidence: Evidence) -> str:
    """The excerpts as the bundle shows them: a header per excerpt naming its lines and
    what matched, matched lines marked with ``>``."""
    return "".join(_excerpt_block(e) for e in evidence.excerpts)
