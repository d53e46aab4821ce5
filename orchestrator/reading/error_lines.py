"""The one line of a stage's log that says what went wrong, for the console and the halt,
and the few lines that lead up to it, for the console, the batch and ``show``.

A failed stage is reported by its first cause, not by a later symptom: a clone stage that
could not even start says ``can't open file .../clone.py``, not "the clone is missing".
The line is redacted (logs are untrusted and may hold secrets) and made printable (an
escape sequence in a log must not act on the operator's terminal).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from orchestrator.domain.terminal import plain
from orchestrator.redaction import redact

TAIL_BYTES: Final = 16 * 1024
MAX_CHARS: Final = 300
# How many of a failed program's last lines the console and ``show`` repeat: enough for a
# traceback's last frame and its exception, or git's ``error:`` and ``fatal:``.
MAX_ERROR_LINES: Final = 5
# The runner's own header and footer lines in every stage log (execution/runner.py).
_RUNNER_LINE = re.compile(r"^# (orchestrator: |\$ )")
_ERROR_WORDS = re.compile(
    r"error|fatal|can't|cannot|could not|couldn't|not found|no such|denied|refused|"
    r"failed|exception|abort|panic|killed",
    re.IGNORECASE,
)
_NOT_AN_ERROR = re.compile(r"^Traceback \(most recent call last\):$")


def _printable(line: str) -> str:
    # A tab is layout (diffs, test reports), not a control sequence: keep it as spaces.
    return "".join(c if c.isprintable() else "?" for c in line.expandtabs(4))


def _bounded(line: str) -> str:
    line = _printable(line)
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def _program_lines(log_text: str) -> list[str]:
    """The lines the program printed, redacted, without blank lines or the runner's own."""
    # Redacted whole, before choosing: a secret (a PEM block) may span lines.
    return [
        stripped
        for raw in redact(plain(log_text)).splitlines()
        if (stripped := raw.strip()) and not _RUNNER_LINE.match(stripped)
    ]


def _last_error_index(lines: list[str]) -> int:
    return next(
        (
            i
            for i in range(len(lines) - 1, -1, -1)
            if _ERROR_WORDS.search(lines[i]) and not _NOT_AN_ERROR.match(lines[i])
        ),
        len(lines) - 1,
    )


def last_error_line(log_text: str) -> str | None:
    """The last line that reads like an error (a Python exception's last line, git's
    ``fatal:``, a shell's ``not found``), else the last line the program printed; None
    when it printed nothing. Pure."""
    lines = _program_lines(log_text)
    if not lines:
        return None
    return _bounded(lines[_last_error_index(lines)])


def error_lines(log_text: str, *, max_lines: int = MAX_ERROR_LINES) -> list[str]:
    """The program's last lines up to and including its last error line (at most
    ``max_lines``): the error with what led to it, not the noise printed after it.
    Redacted, printable, each at most ``MAX_CHARS``. Pure."""
    lines = _program_lines(log_text)
    if not lines:
        return []
    end = _last_error_index(lines) + 1
    return [_bounded(line) for line in lines[max(0, end - max_lines) : end]]


def _tail(log_path: Path, max_bytes: int) -> str | None:
    try:
        with log_path.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - max_bytes))
            tail = log.read()
    except OSError:
        return None
    return tail.decode("utf-8", "replace")


def last_error_line_of(log_path: Path | None, *, max_bytes: int = TAIL_BYTES) -> str | None:
    """``last_error_line`` of the end of a log file; None when there is no such file."""
    tail = None if log_path is None else _tail(log_path, max_bytes)
    return None if tail is None else last_error_line(tail)


def error_lines_of(log_path: Path | None, *, max_bytes: int = TAIL_BYTES) -> list[str]:
    """``error_lines`` of the end of a log file; empty when there is no such file."""
    tail = None if log_path is None else _tail(log_path, max_bytes)
    return [] if tail is None else error_lines(tail)
