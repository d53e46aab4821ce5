"""``orchestrator resume RUN [--from-stage S] [--by WHO]``: go on with a stopped run from
the stage that stopped it (or from S), once a person has fixed the cause; the stages that
finished are not run again. Exits like ``run`` with the run's new outcome."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.ledger_link import ledger_for
from orchestrator.app.resume import resume_run
from orchestrator.app.services import build_services
from orchestrator.cli.commands.doctor import gate
from orchestrator.cli.commands.run import exit_code
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import TicketLocked
from orchestrator.storage import os_user, resolve_run_id


class ResumeLocked(TicketLocked):
    """Another orchestrator is driving the ticket: nothing was changed."""

    def __init__(self, locked: TicketLocked) -> None:
        super().__init__(locked.ticket_id, locked.holder_pid)
        holder = f"pid {locked.holder_pid}" if locked.holder_pid else "another process"
        self.args = (
            f"resume refused: {locked.ticket_id} is being run by {holder}; nothing was "
            "changed. Try again once it has stopped",
        )


def resume(
    config_file: Path,
    state_dir_override: str | None,
    run: str,
    *,
    from_stage: str | None,
    by: str | None,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    preflight: bool = True,
    err: TextIO | None = None,
) -> int:
    loaded = load_config(config_file)
    if preflight:
        gate(loaded, state_dir_override, environ, err or sys.stderr, warn=False)
    services = build_services(loaded, state_dir_override, out, environ)
    run_id = resolve_run_id(services.storage.runs, run)
    try:
        record = resume_run(
            services,
            ledger_for(services.storage.runs.state_dir, environ),
            run_id,
            by=by or os_user(),
            from_stage=from_stage,
        )
    except TicketLocked as exc:
        raise ResumeLocked(exc) from None
    return exit_code(record)
