"""``orchestrator run TICKET``: drive one ticket to a terminal state (or resume it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.driver import run_ticket
from orchestrator.cli.console import terminal_services
from orchestrator.cli.preflight import gate
from orchestrator.domain.config import load_config
from orchestrator.domain.runs import exit_code
from orchestrator.domain.tickets import load_ticket


def run(
    config_file: Path,
    state_dir_override: str | None,
    ticket_file: str,
    *,
    rerun: bool,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    preflight: bool = True,
    err: TextIO | None = None,
) -> int:
    """``preflight``: check the machine first (``doctor.gate``); False: ``--no-preflight``."""
    loaded = load_config(config_file)
    # The ticket is validated before anything is created under the state dir.
    ticket = load_ticket(Path(ticket_file))
    if preflight:
        gate(loaded, state_dir_override, environ, err or sys.stderr)
    services = terminal_services(loaded, state_dir_override, out, environ)
    return exit_code(run_ticket(ticket, services, rerun=rerun))
