"""A log line's template: the line with what changes from run to run masked.

Two runs of the same build print the same lines with other numbers, hashes, paths,
timestamps and durations in them. With those masked, a line of a failed run whose
template a green run also printed is ordinary output; one whose template no green run
printed (or that occurs once in the log it is in) is worth a reader's look. This is the
idea of Zuul's logreduce/logjuicer and of Drain's token masking, kept to one pure
function over bytes so the baseline and the in-log rarity agree on what a line "is".

Pure: same bytes, same template.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["MAX_TEMPLATE_BYTES", "template_key", "template_of"]

# A template longer than this is cut: a minified line is one template whatever its end.
MAX_TEMPLATE_BYTES: Final = 240

# Read of a line: a template depends on its start, and a minified line's megabyte must
# not cost a megabyte of masking.
MAX_LINE_BYTES: Final = 1024

# Masked in this order, each pass a constant replacement (no Python call per match): what
# a pass leaves (``<id>``, ``<time>``, ``<path>``) holds no digit or separator the later
# passes could take.
_MASKS: Final = (
    (
        re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
        b"<id>",
    ),
    # A clock or a date (with whatever fraction and zone follows).
    (
        re.compile(
            rb"\d{1,4}[-/:]\d{1,2}[-/:]\d{1,4}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?"
            rb"(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
        ),
        b"<time>",
    ),
    # A URL or a path (``/usr/lib/x.so``, ``src/a.c``, ``C:\\x``): separated components
    # with a letter among them (``12/20`` is two numbers). Tried only where a token starts,
    # so a long token costs one attempt, not one per byte.
    (
        re.compile(
            rb"(?<![\w.~@+%=-])(?=[\w.~@+%=:/\\-]*[A-Za-z])(?:[a-z][a-z0-9+.-]*://)?[\w.~@+-]*"
            rb"(?:[/\\][\w.~@+%=-]+)+/?"
        ),
        b"<path>",
    ),
    # A hash, an address, a run's hex id: hex with at least one digit and one letter.
    (
        re.compile(rb"\b(?:0x)?(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{6,}\b"),
        b"<hex>",
    ),
    # A number, with its fraction and unit (a duration, a size, a percentage).
    (re.compile(rb"\d+(?:[.,]\d+)*(?:[a-zA-Z]{1,3}\b|%)?"), b"<n>"),
)
_DIGITS: Final = re.compile(rb"\d")
_BLANKS: Final = re.compile(rb"[ \t]+")


def template_of(line: bytes) -> bytes:
    """The line's template: run-to-run detail masked, runs of blanks made one (and none
    kept inside a bracket's edge: ``[ 45%]`` and ``[100%]`` are one padded column), cut
    to ``MAX_TEMPLATE_BYTES``. The line is the tool's text (its CI prefix already
    removed); only its first ``MAX_LINE_BYTES`` are read."""
    text = line[:MAX_LINE_BYTES].strip()
    has_digit = _DIGITS.search(text) is not None
    has_separator = b"/" in text or b"\\" in text
    if has_digit or has_separator:
        for pattern, replacement in _MASKS:
            if has_digit or replacement == b"<path>":
                text = pattern.sub(replacement, text)
    text = _BLANKS.sub(b" ", text)
    if b"[ " in text or b" ]" in text or b"( " in text or b" )" in text:
        text = (
            text.replace(b"[ ", b"[").replace(b" ]", b"]").replace(b"( ", b"(").replace(b" )", b")")
        )
    return text[:MAX_TEMPLATE_BYTES]


def template_key(template: bytes) -> bytes:
    """A compact, stable key for a template (8 bytes of BLAKE2b): what a baseline keeps."""
    return hashlib.blake2b(template, digest_size=8).digest()
