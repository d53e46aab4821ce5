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

# Masked, most specific first (one pass: alternatives of one expression, leftmost wins).
_MASKS: Final = re.compile(
    rb"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    # A clock or a date (with whatever fraction and zone follows).
    rb"|(?P<time>\d{1,4}[-/:]\d{1,2}[-/:]\d{1,4}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?"
    rb"(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    # A URL or a path (``/usr/lib/x.so``, ``src/a.c``, ``C:\\x``): separated components
    # with a letter among them (``12/20`` is two numbers).
    rb"|(?P<path>(?=[\w.~@+%=:/\\-]*[A-Za-z])(?:[a-z][a-z0-9+.-]*://)?[\w.~@+-]*"
    rb"(?:[/\\][\w.~@+%=-]+)+/?)"
    # A hash, an address, a run's hex id: hex with at least one digit and one letter.
    rb"|(?P<hex>\b(?:0x)?(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{6,}\b)"
    # A number, with its fraction and unit (a duration, a size, a percentage).
    rb"|(?P<number>\d+(?:[.,]\d+)*(?:[a-zA-Z]{1,3}\b|%)?)"
)
_REPLACEMENT: Final = {
    "uuid": b"<id>",
    "time": b"<time>",
    "path": b"<path>",
    "hex": b"<hex>",
    "number": b"<n>",
}
# Blanks are layout: a run of them is one, and none is kept inside a bracket's edge
# (``[ 45%]`` and ``[100%]`` are one column, padded).
_BLANKS: Final = re.compile(rb"(?<=[\[(])[ \t]+|[ \t]+(?=[\])])|([ \t]+)")


def _mask(match: re.Match[bytes]) -> bytes:
    return _REPLACEMENT[match.lastgroup or "number"]


def template_of(line: bytes) -> bytes:
    """The line's template: run-to-run detail masked, runs of blanks made one, cut to
    ``MAX_TEMPLATE_BYTES``. The line is the tool's text (its CI prefix already removed)."""
    masked = _MASKS.sub(_mask, line.strip())
    return _BLANKS.sub(lambda m: b" " if m.group(1) else b"", masked)[:MAX_TEMPLATE_BYTES]


def template_key(template: bytes) -> bytes:
    """A compact, stable key for a template (8 bytes of BLAKE2b): what a baseline keeps."""
    return hashlib.blake2b(template, digest_size=8).digest()
