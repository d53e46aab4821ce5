"""The words a regular expression cannot match without: a cheap gate before ``re``.

``needed(source, flags)`` reads an expression's syntax tree (``re``'s own parser) and
returns lower-case strings such that every match of the expression, on a line of ASCII
text, holds at least one of them, lower-cased; or None when it finds no such string of
``MIN_WORD`` characters or more. A caller that finds none of them in
``line.lower()`` knows the expression cannot match that line without running it: the
gate decides only whether ``re`` is asked, never what a match is.

Why ASCII only: on ASCII text a case-insensitive ``re`` compares letters as ``lower()``
does, and ``\\s``, ``\\d``, ``\\w`` and ``\\b`` mean their ASCII selves. Beyond ASCII,
``re`` folds more than ``lower()`` (the long s matches ``s``, the dotless i ``i``), so a
line that is not ASCII is always given to ``re``.

How the words are found, each step keeping "every match holds one of them" true:
consecutive literal characters of a sequence form a word (a zero-width anchor or word
boundary between them does not part them); a group, a repeat of at least one, or a
look-ahead or look-behind (what it sees is part of the line too) needs what its content
needs; an alternation needs one of what each branch needs (nothing, if any branch needs
nothing); a sequence needs the best of what any of its parts needs (the longest
shortest word).
"""

from __future__ import annotations

from re import _parser  # type: ignore[attr-defined]  # re's own parser (sre_parse)
from typing import Any, Final

__all__ = ["MIN_WORD", "alternatives", "needed"]

# A gate word shorter than this is in nearly every line: no gate at all.
MIN_WORD: Final = 3

_C: Any = _parser  # the parser's constants (LITERAL, BRANCH, ...) live beside it
_ZERO_WIDTH: Final = (_C.AT,)
_REPEATS: Final = (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT)
_LOOKS: Final = (_C.ASSERT,)


def needed(source: str, flags: int = 0) -> frozenset[str] | None:
    """Lower-case strings one of which every match of ``source`` (compiled with
    ``flags``) holds, on ASCII text; None when no gate of ``MIN_WORD`` characters or more
    is known."""
    return _of_sequence(_parser.parse(source, flags))


def alternatives(source: str) -> list[str]:
    """``source`` split at its top-level ``|`` (not inside a group, a class or after a
    backslash): an expression matches where one of these does."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(source, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(source[start:i])
            start = i + 1
        i += 1
    parts.append(source[start:])
    return parts


def _class_end(source: str, start: int) -> int:
    i = start + (2 if source[start + 1 : start + 2] == "^" else 1)
    i += 2 if source[i : i + 1] == "\\" else 1  # the first member (may be ']')
    while source[i : i + 1] != "]":
        i += 2 if source[i : i + 1] == "\\" else 1
    return i + 1


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    key_a = (min(map(len, a)), -len(a))
    key_b = (min(map(len, b)), -len(b))
    return b if key_b > key_a else a


def _of_sequence(items: Any) -> frozenset[str] | None:
    best: frozenset[str] | None = None
    word: list[str] = []

    def close() -> None:
        nonlocal best
        if len(word) >= MIN_WORD:
            best = _better(best, frozenset({"".join(word)}))
        word.clear()

    for op, av in items:
        if op is _C.LITERAL and av < 128:
            word.append(chr(av).lower())
            continue
        if op in _ZERO_WIDTH:
            continue  # an anchor or a word boundary: the letters around it stay adjacent
        close()
        best = _better(best, _of_item(op, av))
    close()
    return best


def _of_item(op: Any, av: Any) -> frozenset[str] | None:
    if op is _C.SUBPATTERN:
        return _of_sequence(av[-1])  # (group, flags added, flags removed, content)
    if op is _C.ATOMIC_GROUP:
        return _of_sequence(av)
    if op in _REPEATS:
        low, _high, content = av
        return _of_sequence(content) if low >= 1 else None
    if op in _LOOKS:
        return _of_sequence(av[1])  # what a look-ahead or look-behind sees is in the line
    if op is _C.BRANCH:
        union: set[str] = set()
        for branch in av[1]:
            words = _of_sequence(branch)
            if words is None:
                return None
            union |= words
        return frozenset(union)
    return None  # a class, any character, a negated literal, a back-reference, ...
