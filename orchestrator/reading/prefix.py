"""The prefix a log puts before every line, learned from the log itself.

CI systems and build wrappers put their own columns in front of a tool's line: Zuul's
``2019-01-01 12:00:00.123456 | ``, mozharness's ``[task 2019-…Z] 12:00:00 INFO - ``,
mock's ``DEBUG util.py:459:  ``, DLRN's ``INFO:dlrn-build:DEBUG:``, a console's
``[12:00:00] ``. Listing one prefix per CI system is a list that is never complete; a
log's own lines show what repeats. A prefix is the first ``k`` blank-separated tokens of a
line when, across a sample of the log's lines, most lines start with the same ``k``
tokens once run-to-run detail is masked (``reading.templates``) and a log level is one
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

from orchestrator.reading.templates import template_of

__all__ = ["MAX_TOKENS", "Prefix", "learn_prefix", "without_prefix"]

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
# the head ends with a separator (``DEBUG util.py:<n>:``, ``<time> |``).
_PREFIX_LIKE: Final = re.compile(
    rb"^\S*(?:<(?:n|time|path|hex|id|level)>|[:|\]\[>#=])|[:|\]>-]$"
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


def _token_templates(line: bytes) -> tuple[bytes, ...]:
    """The template of each of the line's first ``MAX_TOKENS`` tokens (a log level one
    token whatever level it names), those followed by more of the line only."""
    heads = []
    for token in _TOKEN.finditer(line):
        if len(heads) == MAX_TOKENS or token.end() >= len(line.rstrip()):
            break
        heads.append(_LEVEL.sub(b"<level>", template_of(token.group())))
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
    return learned


def without_prefix(line: bytes, prefix: Prefix | None) -> bytes:
    """``line`` after the learned prefix when it starts with it (a line some other
    program printed into the log does not), else the line itself; a prefix never leaves
    nothing."""
    if prefix is None:
        return line
    end = _head_end(line, prefix.tokens)
    if end is None or _head(_token_templates(line), prefix.tokens) != prefix.head:
        return line
    return line[end:]
