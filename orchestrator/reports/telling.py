"""The one line of a stage's log that says what went wrong, for the console and the halt.

A failed stage is reported by its first cause, not by a later symptom: a clone stage that
could not even start says ``can't open file .../clone.py``, not "the clone is missing".
The line is redacted (logs are untrusted and may hold secrets) and made printable (an
escape sequence in a log must not act on the operator's terminal).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from orchestrator.recovery.redact import redact

TAIL_BYTES: Final = 16 * 1024
MAX_CHARS: Final = 300
# The runner's own header and footer lines in every stage log (execution/runner.py).
_RUNNER_LINE = re.compile(r"^# (orchestrator: |\$ )")
_TELLING = re.compile(
    r"error|fatal|can't|cannot|could not|couldn't|not found|no such|denied|refused|"
    r"failed|exception|abort|panic|killed",
    re.IGNORECASE,
)
_NOT_TELLING = re.compile(r"^Traceback \(most recent call last\):$")


def _printable(line: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in line)


def telling_line(log_text: str) -> str | None:
    """The last line that reads like an error (a Python exception's last line, git's
    ``fatal:``, a shell's ``not found``), else the last line the program printed; None
    when it printed nothing. Pure."""
    # Redacted whole, before choosing: a secret (a PEM block) may span lines.
    lines = [
        stripped
        for raw in redact(log_text).splitlines()
        if (stripped := raw.strip()) and not _RUNNER_LINE.match(stripped)
    ]
    if not lines:
        return None
    chosen = next(
        (
            line
            for line in reversed(lines)
            if _TELLING.search(line) and not _NOT_TELLING.match(line)
        ),
        lines[-1],
    )
    chosen = _printable(chosen)
    return chosen if len(chosen) <= MAX_CHARS else chosen[: MAX_CHARS - 1] + "…"


def telling_line_of(log_path: Path | None, *, max_bytes: int = TAIL_BYTES) -> str | None:
    """``telling_line`` of the end of a log file; None when there is no such file."""
    if log_path is None:
        return None
    try:
        with log_path.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - max_bytes))
            tail = log.read()
    except OSError:
        return None
    return telling_line(tail.decode("utf-8", "replace"))
