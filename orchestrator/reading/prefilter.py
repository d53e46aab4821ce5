"""A DFA pre-pass for the evidence scan: RE2 finds the lines that may be evidence.

Python's ``re`` backtracks: however the signature table is arranged, it pays tens of
nanoseconds at every line start of a 64 MiB log (about four times ``grep -c``). RE2 runs
one automaton over the bytes and pays a few nanoseconds per byte whatever the number of
alternatives, about as fast as grep. But RE2 has no look-around and no possessive or
atomic groups, which the table uses to stay exact and fast in ``re``.

So RE2 is given a *wider* expression: every look-around and word boundary dropped, every
possessive repeat and atomic group made ordinary (each change can only let more lines
through), or, for a signature whose widened form would let ordinary lines through (a
Python exception line is ``<path>:`` once its look-behinds are gone), a hand-written wide
form (``Signature.prefilter``, tested to accept what the signature accepts). Each line it
finds is then checked with the exact ``re`` expression: the pre-pass decides only where
``re`` looks, never what a hit is, so the hits are the same with or without it.

RE2 comes from the ``google-re2`` wheel. Where it cannot be imported (a platform with no
wheel), ``prefilter_for`` returns None and the scan runs ``re`` alone, slower, same hits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol

__all__ = ["Prefilter", "any_word", "atom_end", "class_end", "prefilter_for", "units", "widened"]


class _Match(Protocol):
    def start(self) -> int: ...


class Prefilter(Protocol):
    """A compiled pre-pass: ``search(buf, pos, endpos)`` like ``re.Pattern.search``."""

    def search(self, text: bytes | bytearray, pos: int, endpos: int) -> _Match | None: ...

    # A scan is cached by its arguments (``scan._scan_once``): a pattern object hashes.
    def __hash__(self) -> int: ...


# A look-around's opening (RE2 has none), and a counted repeat (a possessive mark may
# follow it).
_LOOKAROUND: Final = re.compile(rb"\(\?(?:<=|<!|=|!)")
_BOUND: Final = re.compile(rb"\{\d*(?:,\d*)?\}")


def class_end(pattern: bytes, start: int) -> int:
    """The offset just past the byte class opening at ``start``: its first unescaped
    ']' after its first member."""
    i = start + (2 if pattern[start + 1 : start + 2] == b"^" else 1)
    i += 2 if pattern[i : i + 1] == b"\\" else 1  # the first member (may be ']')
    while pattern[i : i + 1] != b"]":
        i += 2 if pattern[i : i + 1] == b"\\" else 1
    return i + 1


def atom_end(pattern: bytes, i: int) -> int:
    """The offset just past the unit of syntax at ``i``: an escape, a byte class, or one
    byte (what a walk over a pattern steps by, so no ``(``, ``)`` or ``|`` inside an
    escape or a class is taken for syntax)."""
    c = pattern[i : i + 1]
    if c == b"\\":
        return i + 2
    if c == b"[":
        return class_end(pattern, i)
    return i + 1


def units(pattern: bytes, start: int = 0) -> Iterator[tuple[bytes, int, int]]:
    """Each unit of syntax from ``start`` (see ``atom_end``), its end, and how many groups
    are open after it."""
    depth, i = 0, start
    while i < len(pattern):
        end = atom_end(pattern, i)
        unit = pattern[i:end]
        depth += (unit == b"(") - (unit == b")")
        yield unit, end, depth
        i = end


def _group_end(pattern: bytes, start: int) -> int:
    """The offset just past the group opening at ``start``."""
    for unit, end, depth in units(pattern, start):
        if unit == b")" and depth == 0:
            return end
    raise ValueError(f"unbalanced group at {start} in {pattern!r}")


def widened(pattern: bytes) -> bytes:
    """``pattern`` with what RE2 lacks taken out, each step widening it: look-arounds and
    ``\\b`` removed (a zero-width test dropped can only accept more), possessive repeats
    (``*+``, ``++``, ``?+``, ``{m,n}+``) and atomic groups made ordinary (giving back can
    only find more matches)."""
    out = bytearray()
    i = 0
    repeat = False  # the last thing written was a repeat (``*``, ``+``, ``?``, ``{m,n}``)
    while i < len(pattern):
        c = pattern[i : i + 1]
        after_repeat, repeat = repeat, False
        if c in b"\\[":
            end = atom_end(pattern, i)
            if pattern[i:end] != b"\\b":
                out += pattern[i:end]
            i = end
        elif _LOOKAROUND.match(pattern, i):
            i = _group_end(pattern, i)
        elif pattern.startswith(b"(?>", i):
            out += b"(?:"
            i += 3
        elif c == b"+" and after_repeat:
            i += 1  # a possessive mark: the repeat before it stays, ordinary
        elif c in b"*+?" and not (c == b"?" and out[-1:] == b"("):
            out += c
            i += 1
            repeat = not after_repeat  # ``*?`` is a lazy repeat, not one to mark
        elif c == b"{" and (bound := _BOUND.match(pattern, i)) is not None:
            out += bound.group()
            i = bound.end()
            repeat = True
        else:
            out += c
            i += 1
    return bytes(out)


def _import_re2() -> Any:
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # no wheel for this platform: the exact scan alone
        return None
    return re2


def _latin1_options(re2: Any) -> Any:
    """RE2's options for both pre-passes: bytes read as Latin-1 (one byte one character,
    as ``re`` reads them), nothing captured (only where a match starts is asked)."""
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.never_capture = True
    return options


def prefilter_for(
    line_forms: Iterable[bytes], *, import_re2: Callable[[], Any] = _import_re2
) -> Prefilter | None:
    """One RE2 expression: a newline, then any of ``line_forms`` (each already wide and
    free of what RE2 lacks). Bytes are read as Latin-1, one byte one character, as ``re``
    reads them. None when RE2 is not installed."""
    re2 = import_re2()
    if re2 is None:
        return None
    options = _latin1_options(re2)
    # The automaton's state cache. RE2 falls back to a much slower engine when a search
    # outgrows it; 8 MiB holds the whole table's states with room to spare.
    options.max_mem = 8 << 20
    expression = b"\n(?:" + b"|".join(line_forms) + b")"
    compiled: Prefilter = re2.compile(expression, options)
    return compiled


def any_word(
    words: Iterable[bytes], *, import_re2: Callable[[], Any] = _import_re2
) -> Prefilter | None:
    """One RE2 expression that finds any of ``words`` (literal bytes, read as Latin-1),
    anywhere: the infrastructure signs' gate (``signs.read_up``). None when RE2 is not
    installed."""
    re2 = import_re2()
    if re2 is None:
        return None
    options = _latin1_options(re2)
    # Every byte spelt as itself or as an escape: nothing in a word is syntax.
    spelt = (
        b"".join(bytes([c]) if chr(c).isalnum() else b"\\x%02x" % c for c in word) for word in words
    )
    compiled: Prefilter = re2.compile(b"|".join(spelt), options)
    return compiled
