"""What a log line may carry before the program's own words: the prefix a CI runner or a
build tool puts there. Whatever reads a line for meaning (the evidence signatures, the
infrastructure signs) reads it after the prefix, so the same failure is told the same way
in a stage's own log and in a log that passed through one of these.

At most one prefix, taken whole when present:
  * a timestamp, as GitHub Actions (``2026-12-01T02:53:12.1234567Z ``) and most CI
    runners and loggers print it; GitLab's runner (``FF_TIMESTAMPS``) follows its
    timestamp with the stream's number, ``O`` or ``E`` and a space
    (``2026-12-01T02:53:12.123456Z 00O ``), or a ``+`` when the line goes on the one
    before: that continuation is not a line of its own and keeps its ``00O+``, so no
    reader takes it for a line start;
  * docker BuildKit's step and seconds before each line of a step's output
    (``#8 1.234 E   assert 0 == 4``: a test run inside ``docker build``); its own status
    lines (``#8 ERROR: ...``, ``#8 DONE 0.3s``) have no seconds and no prefix;
  * a Jenkins pipeline's bracketed timestamp (``[2026-12-01T02:53:12.123Z] ``).

Before the timestamp, ``gh run view --log`` (and ``--log-failed``) writes the job's and
the step's names, tab-separated (``build<TAB>Run tests<TAB>2026-12-01T02:53:12.1234567Z
...``, cli/cli#9210; a step's first line may hold a byte-order mark before its clock).
Those two columns are read only where a timestamp follows them, so a tab-separated line
of a program's own (``ok  <TAB>example.com/deal<TAB>0.003s``) keeps its words.
"""

from __future__ import annotations

import re
from typing import Final

CLOCK: Final = rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?"
BUILDKIT: Final = rb"#\d+ \d+\.\d+ "
JENKINS: Final = rb"\[" + CLOCK + rb"\] "
GITLAB_STREAM: Final = rb"[0-9a-f]{2}[EO] "
PREFIX: Final = (
    rb"(?:" + CLOCK + rb" (?:" + GITLAB_STREAM + rb")?|" + BUILDKIT + rb"|" + JENKINS + rb")"
)

_PREFIX: Final = re.compile(PREFIX.decode("ascii"))

# gh's job and step columns (no tab in either name), and the byte-order mark a step's first
# line may carry, when a timestamp follows. Spelt once, as text; the bytes form is its UTF-8
# (the mark becomes its three bytes, still optional as a group).
_MARK: Final = "(?:\ufeff)?"
_COLUMNS: Final = r"[^\t\n]*+\t[^\t\n]*+\t" + _MARK + "(?=" + CLOCK.decode("ascii") + " )"
_COLUMNS_TEXT: Final = re.compile(_COLUMNS)
_COLUMNS_BYTES: Final = re.compile(b"(?m)^" + _COLUMNS.encode("utf-8"))
# Where a chunk may hold them: a tab, then (a mark and) a clock.
_COLUMNS_SIGN: Final = re.compile(("\t" + _MARK).encode("utf-8") + CLOCK + b" ")


def has_columns(data: bytes | bytearray, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` may hold lines with gh's job and step columns: a
    ``memchr`` when it has no tab."""
    return data.find(b"\t", start, end) >= 0 and _COLUMNS_SIGN.search(data, start, end) is not None


def without_columns(data: bytes) -> bytes:
    """``data`` with gh's job and step columns taken off each line that has them (no line
    break is removed: the n-th line stays the n-th). Pure."""
    return _COLUMNS_BYTES.sub(b"", data) if b"\t" in data else data


def without_prefix(line: str) -> str:
    """``line`` after its CI runner's or build tool's prefix (and gh's columns before it),
    if it has one. Pure."""
    if "\t" in line:
        columns = _COLUMNS_TEXT.match(line)
        if columns is not None:
            line = line[columns.end() :]
    found = _PREFIX.match(line)
    return line[found.end() :] if found else line
