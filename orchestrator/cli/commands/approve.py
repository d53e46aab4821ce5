"""``orchestrator approve RUN_ID`` / ``orchestrator reject RUN_ID --reason …``: answer the
decision a run is waiting on, then resume the run (an approved proposal is carried out;
a rejected one ends the ticket ``needs-human``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.answers import answer_decision
from orchestrator.app.driver import run_ticket
from orchestrator.app.services import build_services
from orchestrator.cli.commands.run import exit_code
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import UsageError
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage import FileStorage, os_user, resolve_run_id, ticket_of


def answer(
    config_file: Path,
    state_dir_override: str | None,
    run_id: str,
    *,
    approved: bool,
    reason: str | None,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
) -> int:
    loaded = load_config(config_file)
    services = build_services(loaded, state_dir_override, out, environ)
    store = services.storage.runs
    storage = FileStorage(store.state_dir)
    run_id = resolve_run_id(store, run_id)
    ticket_id = ticket_of(run_id)
    if ticket_id is None:  # resolve_run_id returns recorded run ids only
        raise UsageError(f"{run_id!r} is not a run id")
    with storage.locks.ticket(ticket_id):
        answered = answer_decision(services, run_id, approved=approved, reason=reason, by=os_user())
    decided, approval, record = answered.decided, answered.approval, answered.record
    proposal = decided.proposal
    word = "approved" if approved else "rejected"
    out.write(
        f"{word}: verdict {decided.number} of {run_id} ({decided.action}, "
        f"routed {proposal.routing} at confidence {proposal.confidence}) by {approval.by}\n"
    )
    record = run_ticket(load_ticket(Path(record.ticket_snapshot)), services)
    return exit_code(record)
