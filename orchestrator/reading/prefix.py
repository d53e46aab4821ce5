"""The prefix a log puts before every line, learned from the log itself.

CI systems and build wrappers put their own columns in front of a tool's line: Zuul's
``2019-01-01 12:00:00.123456 | ``, mozharness's ``[task 2019-…Z] 12:00:00 INFO - ``,
mock's ``DEBUG util.py:459:  ``, DLRN's ``INFO:dlrn-build:DEBUG:``, a console's
``[12:00:00] ``. Listing one prefix per CI system is a list that is never complete; a
log's own lines show what repeats. A prefix is the first ``k`` blank-separated tokens of a
line when, across a sample of the log's lines, most lines start with the same ``k``
tokens once their digits are masked and a log level is one
token whatever level it names. The largest such ``k`` (up to ``MAX_TOKENS``) is the
prefix; a head of plain words (``checking for``) is not one: a prefix holds a mask or
punctuation, which a sentence's first words do not.

Pure: same lines, same prefix.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Final, NamedTuple

__all__ = [
    "MAX_TOKENS",
    "Prefix",
    "common_prefixes",
    "learn_prefix",
    "level_of",
    "split_prefix",
]

MAX_TOKENS: Final = 6
# Lines sampled, and the share of them that must start alike.
SAMPLE_LINES: Final = 256
MIN_LINES: Final = 20
SHARE: Final = 0.6

_TOKEN: Final = re.compile(rb"\S+\s*")
_LEVEL: Final = re.compile(
    rb"\b(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b", re.IGNORECASE
)
# What makes a head a prefix rather than a sentence's first words: its first token is a
# time, a number, a level, a path or holds punctuation (``[task``, ``INFO:dlrn:``), or
# the head ends with a separator (``DEBUG util.py:0:``, ``0:0:0 |``).
_PREFIX_LIKE: Final = re.compile(
    # (box drawing, U+2500..U+257F: terraform's and rich's gutters, ``│ ``)
    rb"^\S*(?:<level>|[\d:|\]\[>#=]|\xe2\x94[\x80-\xbf]|\xe2\x95[\x80-\xbf])|[:|\]>-]$"
)


def _head_end(line: bytes, k: int) -> int | None:
    """The offset just past the line's first ``k`` tokens (and the blanks after them);
    None when it has fewer, or nothing after them."""
    end = 0
    for _ in range(k):
        token = _TOKEN.match(line, end)
        if token is None:
            return None
        end = token.end()
    return end if end < len(line.rstrip()) else None


_DIGIT_RUN: Final = re.compile(rb"\d+")


def _shape(token: bytes) -> bytes:
    """A token with its digits masked and a log level named as one: what repeats from
    line to line in a prefix (``[task 0-0-0T0:0:0.0Z]``, ``<level>``). Cheaper than a
    template, and a prefix only needs its lines compared with each other."""
    return _LEVEL.sub(b"<level>", _DIGIT_RUN.sub(b"0", token))


def _token_templates(line: bytes) -> tuple[bytes, ...]:
    """The shape of each of the line's first ``MAX_TOKENS`` tokens, those followed by
    more of the line only."""
    heads: list[bytes] = []
    for token in _TOKEN.finditer(line):
        if len(heads) == MAX_TOKENS or token.end() >= len(line.rstrip()):
            break
        heads.append(_shape(token.group().rstrip()))
    return tuple(heads)


def _head(templates: tuple[bytes, ...], k: int) -> bytes | None:
    return b" ".join(templates[:k]) if len(templates) >= k else None


class Prefix(NamedTuple):
    """A learned prefix: how many leading tokens, and their template."""

    tokens: int
    head: bytes


def learn_prefix(lines: Sequence[bytes]) -> Prefix | None:
    """The prefix most of ``lines`` start with, or None when they share none."""
    sample = [line for line in lines if line.strip()][:SAMPLE_LINES]
    if len(sample) < MIN_LINES:
        return None
    tokens = [_token_templates(line) for line in sample]
    learned: Prefix | None = None
    for k in range(1, MAX_TOKENS + 1):
        heads = Counter(_head(templates, k) for templates in tokens)
        heads.pop(None, None)
        if not heads:
            break
        head, count = heads.most_common(1)[0]
        if count < SHARE * len(sample) or head is None:
            break
        if _PREFIX_LIKE.search(head.rstrip()):
            learned = Prefix(k, head)
    return _ended_at_level(learned)


_SEPARATOR: Final = re.compile(rb"^[-|:>=]+$")


def _ended_at_level(prefix: Prefix | None) -> Prefix | None:
    """A prefix that names a log level ends there (and at the separator after it): what
    follows a level is the message, however alike a stretch of messages starts (a build's
    ``… INFO - gmake[<n>]:``)."""
    if prefix is None:
        return None
    tokens = prefix.head.split(b" ")
    if b"<level>" not in [t.strip(b":[]") for t in tokens]:
        return prefix
    at = next(i for i, t in enumerate(tokens) if t.strip(b":[]") == b"<level>")
    end = at + 1
    if end < len(tokens) and _SEPARATOR.match(tokens[end]):
        end += 1
    return Prefix(end, b" ".join(tokens[:end]))


def common_prefixes(learned: Sequence[Prefix | None]) -> tuple[Prefix, ...]:
    """The prefixes learned from several samples of one log (its start, middle, end): a
    log has sections in other shapes (a CI system's setup, the build), each with its own.
    A prefix another one extends is kept in its place (a sample of alike lines learns a
    token too many: ``… INFO - gmake[0]:`` beside ``… INFO -``)."""
    found = list(dict.fromkeys(p for p in learned if p is not None))

    def extends(longer: Prefix, shorter: Prefix) -> bool:
        return longer.tokens > shorter.tokens and longer.head.split(b" ")[
            : shorter.tokens
        ] == shorter.head.split(b" ")

    return tuple(p for p in found if not any(extends(p, q) for q in found))


def split_prefix(line: bytes, prefixes: Sequence[Prefix]) -> tuple[bytes, bytes]:
    """(the line's prefix, the rest), by the first of the log's prefixes the line starts
    with; the prefix empty when it starts with none (a line some other program printed
    into the log)."""
    if not prefixes:
        return b"", line
    shapes = _token_templates(line)
    for prefix in prefixes:
        end = _head_end(line, prefix.tokens)
        if end is not None and _head(shapes, prefix.tokens) == prefix.head:
            return line[:end], line[end:]
    return b"", line


def level_of(head: bytes) -> bytes | None:
    """The log level a line's prefix names (``ERROR``, ``INFO``), upper-cased; None when
    it names none."""
    found = _LEVEL.search(head)
    return found.group().upper() if found is not None else None
