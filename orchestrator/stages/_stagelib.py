"""Plumbing shared by the stage scripts in this directory (it is not a stage itself).

A stage runs as ``python -m orchestrator.stages.<name>`` with the orchestrator's own
interpreter, so the installed package is importable wherever the project was installed.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import git

if TYPE_CHECKING:
    from orchestrator.domain.tickets import Ticket


# GitPython wraps captured output as "\n  stderr: '...'"; peel that off to read git's words.
_WRAPPER = re.compile(r"^\s*std(?:out|err): '(.*)'\s*$", re.DOTALL)
_TELLING = ("fatal:", "error:", "Patch failed")


class StageError(Exception):
    """An expected failure (bad input, git refused): one line on stderr, exit 1."""


def require_env(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise StageError(f"{name} is not set (this script runs under the orchestrator)")
    return value


def _unwrap(captured: object) -> list[str]:
    text = captured.decode(errors="replace") if isinstance(captured, bytes) else str(captured)
    match = _WRAPPER.match(text)
    body = match.group(1) if match else text
    return [line.strip() for line in body.splitlines() if line.strip()]


def git_output_lines(exc: git.GitCommandError) -> list[str]:
    """Everything git said when it failed, stderr first."""
    return _unwrap(exc.stderr) + _unwrap(exc.stdout)


def git_reason(exc: git.GitCommandError) -> str:
    """git's most telling lines, joined into one line a person can act on."""
    lines = git_output_lines(exc)
    telling = [line for line in lines if line.startswith(_TELLING)]
    if telling:
        return "; ".join(telling[-2:])
    if lines:
        return lines[-1]
    return f"git exited with status {exc.status}"


def run_stage(name: str, main: Callable[[Mapping[str, str]], None]) -> NoReturn:
    """Run ``main(os.environ)``; an expected failure becomes one stderr line and exit 1.
    Anything else propagates with its traceback, because it is a bug in the script."""
    try:
        main(os.environ)
    except StageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


def stage_ticket(environ: Mapping[str, str]) -> Ticket:
    """The run's ticket snapshot; a malformed one is an expected failure, not a traceback."""
    # Imported here: pydantic costs ~100 ms, and the clone stage does not need it.
    from orchestrator.domain.errors import TicketError
    from orchestrator.domain.tickets import load_ticket

    try:
        return load_ticket(Path(require_env(environ, "ORCH_TICKET_FILE")))
    except TicketError as exc:
        raise StageError(str(exc)) from None
