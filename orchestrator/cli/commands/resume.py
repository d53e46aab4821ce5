"""``orchestrator resume RUN [--from-stage S] [--by WHO] [--here]``: go on with a stopped
run from the stage that stopped it (or from S), once a person has fixed the cause; the
stages that finished are not run again. Exits like ``run`` with the run's new outcome.
With a fleet configured (a broker URL), the resume is recorded here and the run is handed
to a worker (``--here``: driven in this shell instead)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.ledger_link import ledger_for
from orchestrator.app.resume import resume_run
from orchestrator.cli.console import terminal_services
from orchestrator.cli.preflight import gate
from orchestrator.cli.to_fleet import hand_to_fleet, on_a_fleet
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import TicketLocked
from orchestrator.domain.lifecycle import is_terminal
from orchestrator.domain.runs import exit_code
from orchestrator.storage.approvals import os_user
from orchestrator.storage.run_ids import resolve_run_id


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
    here: bool = False,
) -> int:
    """With a fleet configured (a broker), the resume is recorded here and the run handed
    to a worker, unless ``here``: then it is driven in this shell, as without a fleet."""
    loaded = load_config(config_file)
    if preflight:
        gate(loaded, state_dir_override, environ, err or sys.stderr, warn=False)
    services = terminal_services(loaded, state_dir_override, out, environ)
    run_id = resolve_run_id(services.storage.runs, run)
    to_fleet = not here and on_a_fleet(loaded.config, environ)
    try:
        record = resume_run(
            services,
            ledger_for(services.storage.runs.state_dir, environ),
            run_id,
            by=by or os_user(),
            from_stage=from_stage,
            drive=not to_fleet,
        )
    except TicketLocked as exc:
        raise ResumeLocked(exc) from None
    if to_fleet and not is_terminal(record.state):
        return hand_to_fleet(loaded, services, record, environ, out)
    return exit_code(record)
