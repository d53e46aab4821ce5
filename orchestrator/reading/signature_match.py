"""The signature table joined into one expression: which lines match, and which signature.

The signatures (``reading.signatures``) are joined into one regular expression that
begins with ``\\n``: the regex engine jumps from newline to newline with a fast literal
search and tries the alternatives only there. What a line costs is the number of
alternatives the engine tests before giving up on it, so the joined expression is built
to turn an ordinary line away in a few byte tests (see ``_dispatch``): the scan of 64 MiB
costs about four times ``grep -c`` with one pattern. Where RE2 is installed, a wider
expression runs first (``reading.prefilter``) and only says where to look.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from orchestrator.domain import log_line
from orchestrator.reading.prefilter import (
    Prefilter,
    class_end,
    prefilter_for,
    units,
    widened,
)
from orchestrator.reading.signatures import _PATH, SIGNATURES, WORDS, Signature

# What may come before a tool's line (``domain/log_line.py``: a CI timestamp, docker
# BuildKit's step and seconds, a Jenkins timestamp), taken whole when present: a line that
# has one is not tried again without it.
_PREFIX: Final = rb"(?:" + log_line.PREFIX + rb")?"


_PREFIX_ONLY: Final = re.compile(_PREFIX)


def _ordered(signatures: tuple[Signature, ...]) -> tuple[Signature, ...]:
    """The order the signatures name a line in: plain, then located."""
    return tuple(s for s in signatures if not s.located) + tuple(s for s in signatures if s.located)


def _forms(pattern: bytes) -> list[bytes]:
    """A pattern's top-level alternatives (``A|B`` gives ``A`` and ``B``)."""
    forms, start = [], 0
    for unit, end, depth in units(pattern):
        if unit == b"|" and depth == 0:
            forms.append(pattern[start : end - 1])
            start = end
    forms.append(pattern[start:])
    return forms


_QUANTIFIER: Final = re.compile(rb"(?:[?*+]|\{\d*(?:,\d*)?\})[?+]?")


def _first_unit(form: bytes) -> tuple[bytes, bytes] | None:
    """The form's first atom that matches one byte (a literal byte, an escape, a class)
    and the quantifier after it (b"" when none); None when the form starts otherwise (a
    group, a look-around, an anchor)."""
    if form.startswith(b"\\x"):
        atom = form[:4]
    elif form.startswith(b"\\"):
        atom = form[:2]
    elif form.startswith(b"["):
        atom = form[: class_end(form, 0)]
    elif form[:1] and form[:1] not in b"()|^$.?*+{}":
        atom = form[:1]
    else:
        return None
    quantifier = _QUANTIFIER.match(form, len(atom))
    return atom, quantifier.group() if quantifier else b""


@functools.cache
def _bytes_of(atom: bytes) -> frozenset[int]:
    return frozenset(b for b in range(256) if re.fullmatch(atom, bytes([b])))


def _class_of(members: frozenset[int]) -> bytes:
    return b"[" + b"".join(b"\\x%02x" % b for b in sorted(members)) + b"]"


def _trie(forms: list[bytes]) -> bytes:
    """The forms as one alternation with shared first units factored out, level by level:
    ``E  +\\S|ERROR \\S|ERROR: \\S`` becomes ``E(?:  +\\S|RROR(?: \\S|: \\S))``. The
    engine skips an alternative whose first byte or class does not match with one test,
    and enters a group only when the byte fits. The scan only asks whether a line
    matches, and factoring a common prefix out of an alternation does not change that."""
    groups: dict[bytes, list[bytes]] = {}
    out: list[bytes] = []
    for form in forms:
        unit = _first_unit(form)
        if unit is None:
            out.append(form)
            continue
        head = unit[0] + unit[1]
        if head not in groups:
            groups[head] = []
            out.append(head)
        groups[head].append(form[len(head) :])
    parts = []
    for item in out:
        tails = groups.get(item)
        if tails is None:
            parts.append(item)
        elif len(tails) == 1:
            parts.append(item + tails[0])
        else:
            parts.append(item + b"(?:" + _trie(tails) + b")")
    return b"|".join(parts)


def _literal_run(tail: bytes) -> bytes:
    """The literal bytes (each one byte, not repeated) a tail starts with."""
    run = b""
    while (unit := _first_unit(tail[len(run) :])) is not None:
        atom, quantifier = unit
        if quantifier or len(_bytes_of(atom)) != 1:
            break
        run += atom
    return run


def _dispatch(forms: list[bytes]) -> bytes:
    """The forms as one alternation that costs few byte tests on a line none matches.

    The first bytes are cut into buckets, the coarsest partition that keeps each byte
    class some form starts with whole (digits, a-f, g-z, A-Z, the other path bytes, the
    blanks): one class test picks the bucket, then a trie of what may follow. A form with
    a literal first byte in a bucket is checked there after its leading literal bytes
    matched, by a look-behind that holds the first byte (rare: only on a line that begins
    like it). First bytes in no class stay literal alternatives (one test each)."""
    split = [(_first_unit(f), f) for f in forms]
    classes = {
        _bytes_of(u[0]) for u, _ in split if u is not None and not u[1] and len(_bytes_of(u[0])) > 1
    }
    by_key: dict[tuple[bool, ...], set[int]] = {}
    for b in range(256):
        key = tuple(b in c for c in sorted(classes, key=sorted))
        if any(key):
            by_key.setdefault(key, set()).add(b)
    buckets = [frozenset(members) for members in by_key.values()]
    tails: dict[frozenset[int], list[bytes]] = {bucket: [] for bucket in buckets}
    literal: list[bytes] = []
    rest: list[bytes] = []
    for unit, form in split:
        if unit is None or unit[1]:
            rest.append(form)
            continue
        atom = unit[0]
        members = _bytes_of(atom)
        tail = form[len(atom) :]
        if len(members) > 1:
            for bucket in buckets:
                if bucket <= members:
                    tails[bucket].append(tail)
            continue
        home = next((bucket for bucket in buckets if members <= bucket), None)
        if home is None:
            literal.append(form)
            continue
        run = _literal_run(tail)
        tails[home].append(run + b"(?<=" + atom + run + b")" + tail[len(run) :])
    parts = [_class_of(b) + b"(?:" + _trie(tails[b]) + b")" for b in buckets if tails[b]]
    if literal:
        parts.append(_trie(literal))
    return b"|".join(parts + rest)


# The prefixes of ``log_line.PREFIX``, spelled out so that every step is one byte test:
# the clock after its first digit, the timestamp (and GitLab's stream after it) after its
# first digit, BuildKit's step and seconds, Jenkins' bracketed clock.
_CLOCK_TAIL_FAST: Final = (
    rb"[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][T ][0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
)
_TIMESTAMP_TAIL_FAST: Final = (
    _CLOCK_TAIL_FAST + rb"(?: |Z |[.,][0-9][0-9]*+Z? )(?:[0-9a-f][0-9a-f][EO] )?+"
)
_BUILDKIT_FAST: Final = rb"#[0-9][0-9]*+ [0-9][0-9]*+\.[0-9][0-9]*+ "
_JENKINS_FAST: Final = rb"\[[0-9]" + _CLOCK_TAIL_FAST + rb"(?:[.,][0-9][0-9]*+)?+Z?\] "
_DIGITS: Final = frozenset(b"0123456789")


def _combined(signatures: tuple[Signature, ...]) -> re.Pattern[bytes]:
    """One expression for the whole table: ``\\n``, then the signatures at the line's
    first byte, or after a timestamp. No capturing groups; the rare matching line is
    named afterwards by ``_classify``.

    The engine tries an expression's alternatives one after the other, so the cost of the
    scan is the number of tests a line that matches nothing goes through (measured
    against ``grep -c`` in bench/bench_evidence.py): ``_dispatch`` keeps it small.

    The table reads a timestamp as one whatever follows it (a line that has one is not
    tried again without it), and an optional timestamp before everything would cost a
    sub-match on every line. So only a line starting with a digit tries one: after the
    first digit the rest of a timestamp is taken possessively, and the byte before
    tells which case holds — a space (a timestamp was taken: the signatures follow) or
    the digit (none was: the forms that can start with a digit go on)."""
    plain = [f for s in signatures if not s.located for f in _forms(s.pattern)]
    located = (
        _PATH
        + b"(?:"
        + _trie([f for s in signatures if s.located for f in _forms(s.pattern)])
        + b")"
    )
    after_timestamp = _dispatch([*plain, located])
    # BuildKit's and Jenkins' prefixes start with '#' or '[' and a digit, which no
    # signature does: a line that has one can match only after it, as the table reads.
    prefixed = [p + b"(?:" + after_timestamp + b")" for p in (_BUILDKIT_FAST, _JENKINS_FAST)]
    # Each form that can start with a digit is cut in two: its digit-first part goes on
    # after the first digit, the rest stays in the dispatch.
    not_digit: list[bytes] = [*prefixed]
    after_digit: list[bytes] = []
    for form in [*plain, located]:
        unit = _first_unit(form)
        if unit is not None and unit[1] and _bytes_of(unit[0]) & _DIGITS:
            # It would be tried again on a timestamped line from its first byte.
            raise ValueError(f"a form may not start with a repeated digit class: {form!r}")
        members = _bytes_of(unit[0]) if unit is not None else frozenset()
        if unit is None or not members & _DIGITS:
            not_digit.append(form)
            continue
        tail = form[len(unit[0]) :]
        if not _DIGITS <= members:
            tail = b"(?<=" + unit[0] + b")" + tail
        after_digit.append(tail)
        if members - _DIGITS:
            not_digit.append(_class_of(members - _DIGITS) + form[len(unit[0]) :])
    digit_first = (
        b"[0-9](?:" + _TIMESTAMP_TAIL_FAST + b")?+"
        b"(?:(?<= )(?:" + after_timestamp + b")|(?<=[0-9])(?:" + _trie(after_digit) + b"))"
    )
    return re.compile(rb"\n(?:" + _dispatch([*not_digit, digit_first]) + b")")


def _line_forms(signatures: tuple[Signature, ...]) -> list[bytes]:
    """Each signature as a wide form of the whole line after the timestamp, for RE2."""
    path = widened(_PATH)
    return [
        s.prefilter
        if s.prefilter is not None
        else (path if s.located else b"") + b"(?:" + widened(s.pattern) + b")"
        for s in signatures
    ]


@dataclass(frozen=True)
class _Tables:
    combined: re.Pattern[bytes]
    each: tuple[tuple[Signature, re.Pattern[bytes]], ...]
    prefilter: Prefilter | None


@functools.cache
def _tables() -> _Tables:
    """The table compiled, on first use: the joined expression takes about a fifth of a
    second to compile, which every orchestrator process would pay at start, though most
    never read a failure."""
    return _Tables(
        combined=_combined(SIGNATURES),
        each=tuple(
            (
                s,
                re.compile(
                    b"(?>" + _PREFIX + b")"
                    + (_PATH if s.located else b"")
                    + b"(?:" + s.pattern + b")"
                ),
            )
            for s in _ordered(SIGNATURES)
        ),
        # The timestamp is optional before every form: RE2 tries both readings at no cost.
        prefilter=prefilter_for(
            [widened(_PREFIX) + b"(?:" + b"|".join(_line_forms(SIGNATURES)) + b")"]
        ),
    )  # fmt: skip


def re2_prefilter() -> Prefilter | None:
    """The RE2 pre-pass over the table, or None where RE2 is not installed."""
    return _tables().prefilter


# A line the pre-pass lets through and the exact expression turns away costs a round
# trip through Python. Past this many in one chunk (a log made of near misses), the rest
# of the chunk is left to ``re`` alone: never much slower than without the pre-pass.
MAX_NEAR_MISSES_PER_CHUNK: Final = 256


def _line_starts(
    buf: bytes | bytearray, pos: int, end: int, prefilter: Prefilter | None
) -> Iterator[int]:
    """The starts of the lines in ``buf[pos:end]`` the joined expression matches, in
    order (each line must follow a newline). The pre-pass, when given, only says where to
    look: every line it finds is checked with the exact expression."""
    if prefilter is not None:
        near_misses = 0
        exact = _tables().combined.match
        while (found := prefilter.search(buf, pos, end)) is not None:
            newline = found.start()
            pos = newline + 1
            if exact(buf, newline, end):
                yield pos
                continue
            near_misses += 1
            if near_misses > MAX_NEAR_MISSES_PER_CHUNK:
                break
        else:
            return
    search = _tables().combined.search
    while (match := search(buf, pos, end)) is not None:
        pos = match.start() + 1
        yield pos


def _classify(buf: bytes | bytearray, line_start: int, end: int) -> Signature:
    """Which signature the joined expression matched at ``line_start``."""
    for signature, pattern in _tables().each:
        if pattern.match(buf, line_start, end):
            return signature
    raise AssertionError("the joined expression matched no signature")  # pragma: no cover


def _named(message: bytes) -> Signature:
    """The signature a line's text after the log's prefix matches, or ``WORDS``."""
    for signature, pattern in _tables().each:
        if pattern.match(message + b"\n"):
            return signature
    return WORDS
