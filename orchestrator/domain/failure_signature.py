"""A failure's signature (issue 44): the lines that decided it, with what varies between
runs of the same failure masked, so that the same failure on another ticket, another day
or another machine has the same signature and a different failure does not.

What varies, and is masked (in this order, so a longer shape is masked before a part of
it): timestamps (``2026-12-07T11:55:02Z``, ``11:55:02.123``), URLs' hosts and paths
(``https://<host>/<path>``), e-mail addresses, IP addresses, UUIDs, hashes (7+ hex digits
with a digit and a letter: a commit, a digest), versions (``1.2.3``, ``v20.11.0-rc.1``),
absolute paths (the directory: a clone's, a temp dir's, a runner's work dir; the file's
name is kept: which file failed is the failure), host names, and numbers that stand alone
(line and column numbers, durations, sizes, pids, counts).

What does not vary, and is kept: the words, the punctuation, relative paths, and numbers
that are part of a word (``E0425``, ``F401``, ``TS2304``, ``utf8``, ``x86_64``): an error
code names the failure. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Annotated, Final

from pydantic import Field, StrictStr

from orchestrator.domain.validation import Frozen

# At most this many deciding lines make a signature, each at most this long (masked): a
# failure is named by its first few causes, and a signature stays small to read and store.
MAX_LINES: Final = 4
MAX_LINE_CHARS: Final = 300

_MASKS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # ISO 8601 and common log timestamps (date, then a time of day on its own).
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2})?)?\b"
        ),
        "<time>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    # A URL: scheme and the rest up to a space or a closing quote/bracket.
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]]+"), "<url>"),
    # An address's domain ends in letters: ``left-pad@1.2.3`` is a package at a version.
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"), "<email>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    # A host name: dotted labels ending in a top-level domain of letters. Before hashes
    # and versions, which would otherwise take a label of digits (``cdn7.a1b2c3d.com``).
    (
        re.compile(r"\b(?:[a-zA-Z0-9-]+\.)+(?:com|org|net|io|dev|edu|gov|cloud|co|uk|de)\b"),
        "<host>",
    ),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    # A hash: 7 or more hex digits holding at least one digit and one letter.
    (re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}\b"), "<hash>"),
    # A version: two or more dot-separated numbers, an optional v and pre-release tail.
    (re.compile(r"\bv?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?\b"), "<version>"),
    # An absolute path's directories (POSIX, ~, Windows): the file's own name is kept.
    (
        re.compile(r"(?:(?<![\w.])~|(?<![\w.:/])(?:[A-Za-z]:)?)[/\\](?:[^\s/\\'\"():,]+[/\\])+"),
        "<dir>/",
    ),
    # A number standing alone, with a unit if it has one (``0.58s``, ``10m0s``, ``3.2MiB``);
    # not part of a word: E0425, x86_64 and utf8 are kept.
    (
        re.compile(
            r"(?<![A-Za-z0-9_])(?:\d+(?:[.,]\d+)?(?:ns|us|ms|s|sec|secs|m|min|mins|h|b|kb|kib|mb"
            r"|mib|gb|gib|k)?)+(?![A-Za-z0-9_])",
            re.IGNORECASE,
        ),
        "<n>",
    ),
)
_SPACES: Final = re.compile(r"\s+")


def mask(line: str) -> str:
    """``line`` with what varies between runs of the same failure masked; spaces folded
    and the ends stripped. Pure."""
    masked = line
    for pattern, placeholder in _MASKS:
        masked = pattern.sub(placeholder, masked)
    masked = _SPACES.sub(" ", masked).strip()
    return masked[:MAX_LINE_CHARS]


SignatureLine = Annotated[StrictStr, Field(min_length=1, max_length=MAX_LINE_CHARS)]


class FailureSignature(Frozen):
    """Where a failure happened (its stage and check), what it was (its class: ``code``
    or an infrastructure class) and its deciding lines, masked."""

    stage: StrictStr
    check: StrictStr | None = None
    failure_class: StrictStr = "code"
    lines: Annotated[tuple[SignatureLine, ...], Field(max_length=MAX_LINES)] = ()

    @property
    def key(self) -> str:
        """A stable digest of the whole signature: the playbook's index key."""
        canonical = json.dumps(
            [self.stage, self.check, self.failure_class, list(self.lines)],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]

    @property
    def empty(self) -> bool:
        """No deciding line: nothing tells this failure from another of its check."""
        return not self.lines


def signature_of(
    stage: str, check: str | None, failure_class: str | None, deciding_lines: Iterable[str]
) -> FailureSignature:
    """The signature of a failure from its deciding lines (as read, redacted): each masked,
    blank and repeated lines dropped, the first ``MAX_LINES`` kept in order. Pure."""
    lines: list[str] = []
    for line in deciding_lines:
        masked = mask(line)
        if masked and masked not in lines:
            lines.append(masked)
        if len(lines) == MAX_LINES:
            break
    return FailureSignature(
        stage=stage, check=check, failure_class=failure_class or "code", lines=tuple(lines)
    )
