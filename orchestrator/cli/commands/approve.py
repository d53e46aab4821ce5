"""``orchestrator approve RUN_ID`` / ``orchestrator reject RUN_ID --reason …``: answer the
decision a run is waiting on, then resume the run (an approved proposal is carried out;
a rejected one ends the ticket ``needs-human``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.driver import pending_verdict, run_ticket
from orchestrator.app.services import build_services
from orchestrator.app.stores import approvals_of
from orchestrator.cli.commands.run import exit_code
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage import Approval, FileStorage, os_user, resolve_run_id, ticket_of


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
        record = store.load(run_id)
        ref = pending_verdict(record)
        if record.state is not RunState.AWAITING_APPROVAL or ref is None:
            raise UsageError(f"run {run_id} is {record.state}, not awaiting approval")
        # The answer is bound to the verdict file as it is now, byte for byte, and signed:
        # a file changed after this no longer has an answer.
        decided, digest = services.storage.decisions.read_with_sha256(run_id, ref.number)
        changed = ref.changed(digest)
        if changed is not None:  # what a person would approve is not what was decided
            raise UsageError(f"{ref.path}: {changed}; nothing was answered")
        proposal = decided.proposal
        approval = approvals_of(services).write(
            Approval(
                decision_id=proposal.decision_id,
                run_id=run_id,
                verdict=decided.number,
                approved=approved,
                by=os_user(),
                at=services.clock(),
                routing=proposal.routing,
                reason=reason,
            ),
            verdict_sha256=digest,
        )
    word = "approved" if approved else "rejected"
    out.write(
        f"{word}: verdict {decided.number} of {run_id} ({decided.action}, "
        f"routed {proposal.routing} at confidence {proposal.confidence}) by {approval.by}\n"
    )
    record = run_ticket(load_ticket(Path(record.ticket_snapshot)), services)
    return exit_code(record)
