"""The redaction pass: every rule of the package over a text, in order.

Fast on ordinary text: the token shapes and the random-run rule are one pass each over
the whole text. The name rules need one of a few ASCII words (``name_rules.KEYWORD``,
searched in a lower-cased copy); only the lines that have one are handed to them, batched
into one string per rule, so each rule is one regular-expression pass over those lines.
"""

from __future__ import annotations

import bisect
import re
import string
from functools import partial
from typing import Final

from orchestrator.redaction.blocks import redact_k8s_secret, redact_pem
from orchestrator.redaction.entropy import redact_random_runs
from orchestrator.redaction.held import HeldSecrets, process_held
from orchestrator.redaction.name_rules import (
    KEYWORD,
    NAME_RULES,
    XML_ELEMENT,
    XML_KEY_VALUE,
    head_value,
)
from orchestrator.redaction.placeholders import REDACTED
from orchestrator.redaction.vendors import TOKEN, rewrite_token

_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _whole_text_rules(text: str, found: set[str]) -> str:
    """The rules that are one cheap pass over any text: PEM blocks, Kubernetes secrets,
    token shapes, XML (starts with a literal)."""
    text = redact_k8s_secret(redact_pem(text))
    text = TOKEN.sub(partial(rewrite_token, found), text)
    text = XML_KEY_VALUE.sub(partial(head_value, found), text)
    return XML_ELEMENT.sub(partial(head_value, found), text)


def _lower_same_length(text: str) -> str:
    """A lower-cased copy whose indices are those of ``text``. ``str.lower`` is fast and
    lowers ASCII exactly; when it changes the length (``'İ'`` becomes two characters),
    lower ASCII only."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _keyword_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint (start, end) spans of whole lines that contain a keyword
    (neighbouring lines make one span). One regular-expression search per such line: the
    search resumes after the line it found. (A value on the line after its name, as in
    ``<token>\\n  value``, is the XML rule's, which runs over the whole text.)"""
    lowered = _lower_same_length(text)
    spans: list[tuple[int, int]] = []
    found = KEYWORD.search(lowered)
    while found is not None:
        at = found.start()
        start = lowered.rfind("\n", 0, at) + 1
        end = lowered.find("\n", at)
        if end < 0:
            end = len(text)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        found = KEYWORD.search(lowered, end + 1) if end < len(text) else None
    return spans


def _name_rules(text: str, found: set[str]) -> str:
    """The name rules over the lines that may hold a name. Each rule runs once, over its
    gated lines joined into one string (rules never match across a line break, and never
    add or remove one, so the result splits back line by line)."""
    spans = _keyword_spans(text)
    if not spans:
        return text
    chunks = [text[start:end] for start, end in spans]
    gates = _Gates([_lower_same_length(chunk) for chunk in chunks])
    changed = False
    for pattern, rewrite, needles in NAME_RULES:
        chosen = gates.chunks_with(needles)
        if not chosen:
            continue
        joined = "\n".join(chunks[i] for i in chosen)
        out = pattern.sub(partial(rewrite, found), joined)
        if out == joined:
            continue
        changed = True
        lines = out.split("\n")
        counts = [chunks[i].count("\n") + 1 for i in chosen]
        if len(lines) != sum(counts):  # never expected: fall back to one chunk at a time
            for i in chosen:
                chunks[i] = pattern.sub(partial(rewrite, found), chunks[i])
            continue
        position = 0
        for i, count in zip(chosen, counts, strict=True):
            chunks[i] = "\n".join(lines[position : position + count])
            position += count
    return _rewrite_spans_with(text, spans, chunks) if changed else text


class _Gates:
    """Which chunks hold which needles. A rule whose needle is common (``=``, ``:``,
    ``-``) takes every chunk; a rare one is found by substring search in all chunks at
    once and mapped back to its chunks, so a rule costs its needle's occurrences, not one
    test per chunk."""

    _COMMON: Final = frozenset({"=", ":", "-"})

    def __init__(self, lowered: list[str]) -> None:
        self._joined = "\n".join(lowered)
        self._starts: list[int] = []
        position = 0
        for chunk in lowered:
            self._starts.append(position)
            position += len(chunk) + 1

    def chunks_with(self, needles: tuple[str, ...]) -> list[int]:
        if self._COMMON.intersection(needles):
            return list(range(len(self._starts)))
        chosen: set[int] = set()
        for needle in needles:
            at = self._joined.find(needle)
            while at >= 0:
                index = bisect.bisect_right(self._starts, at) - 1
                chosen.add(index)
                # resume at the next chunk: one hit per chunk is enough
                nxt = (
                    self._starts[index + 1] if index + 1 < len(self._starts) else len(self._joined)
                )
                at = self._joined.find(needle, nxt)
        return sorted(chosen)


def _rewrite_spans_with(text: str, spans: list[tuple[int, int]], chunks: list[str]) -> str:
    parts: list[str] = []
    position = 0
    for (start, end), chunk in zip(spans, chunks, strict=True):
        parts.append(text[position:start])
        parts.append(chunk)
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _propagate(text: str, found: set[str]) -> str:
    """A value once known to be a secret goes wherever else it appears (longest first, so
    a value containing another is replaced whole)."""
    values = sorted((v for v in found if v != REDACTED), key=len, reverse=True)
    if not values:
        return text
    if len(values) <= 32:
        # A few: a substring replacement each (C speed; compiling a value of a megabyte
        # into a regular expression takes seconds).
        for value in values:
            text = text.replace(value, REDACTED)
        return text
    # Many: one pass for all of them (an alternation tries the longest first).
    return re.sub("|".join(map(re.escape, values)), REDACTED, text)


def _redact_unfiltered(text: str) -> str:
    """What ``redact`` computes, with every name rule run over the whole text (tests
    compare the two)."""
    found: set[str] = set()
    text = _whole_text_rules(text, found)
    for pattern, rewrite, _needles in NAME_RULES:
        text = pattern.sub(partial(rewrite, found), text)
    text = redact_random_runs(text, found)
    return _propagate(text, found)


def redact(text: str, held: HeldSecrets | None = None) -> str:
    """``text`` with every secret this module recognises replaced by ``[REDACTED]``: the
    values ``held`` (by default, what the process holds: ``held.hold``) in every form
    first, then every shape.

    Pure for a given ``held``, linear in ``len(text)``, and idempotent
    (``redact(redact(t)) == redact(t)``).
    """
    text = (process_held() if held is None else held).redact(text)
    found: set[str] = set()
    text = _whole_text_rules(text, found)
    # REDACTED holds no keyword, so the lines to look at are those of the text as it is.
    text = _name_rules(text, found)
    text = redact_random_runs(text, found)
    return _propagate(text, found)


def redact_bytes(data: bytes, held: HeldSecrets | None = None) -> str:
    """Decode as UTF-8 (undecodable bytes become U+FFFD, never an exception), then redact."""
    return redact(data.decode("utf-8", errors="replace"), held)
