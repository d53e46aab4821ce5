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


def without_prefix(line: str) -> str:
    """``line`` after its CI runner's or build tool's prefix, if it has one. Pure."""
    found = _PREFIX.match(line)
    return line[found.end() :] if found else line
