"""``orchestrator approve RUN_ID [--now]`` / ``orchestrator reject RUN_ID --reason …``:
answer the decision a run is waiting on (signed, ledgered).

A reject ends the ticket ``needs-human`` at once: nothing is left to carry out.

An approve records the answer and, by default, leaves carrying it out to the next
``orchestrator batch``, whose environment decides DRY_RUN and which tools run (a fleet
worker's, with ``--backend celery``, under the fleet's lease): carrying it out here would
run the rest of the ticket in the approver's shell, where DRY_RUN is armed unless said
otherwise, and a run stopped there by DRY_RUN would look finished to every later batch.
The output says which batch continues it and the command that continues it at once
(``orchestrator resume RUN``). ``--now`` carries it out here, as before, and says that
this shell's environment decides DRY_RUN.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.answers import answer_decision
from orchestrator.app.driver import run_ticket
from orchestrator.app.services import Services
from orchestrator.cli.console import terminal_services
from orchestrator.cli.to_fleet import hand_to_fleet, on_a_fleet
from orchestrator.domain.config import Config, load_config
from orchestrator.domain.errors import EXIT_COMPLETED, UsageError
from orchestrator.domain.lifecycle import RunState, dry_run_armed
from orchestrator.domain.runs import exit_code, pending_verdict
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage.approvals import os_user
from orchestrator.storage.layout import ticket_of
from orchestrator.storage.run_ids import resolve_run_id


def next_batch(config: Config, environ: Mapping[str, str]) -> str:
    """Which batch carries an answer out, and whose environment decides DRY_RUN there."""
    if on_a_fleet(config, environ):
        return (
            "the next `orchestrator batch --backend celery` hands it to a worker, whose "
            "environment decides DRY_RUN and the tools (a local `orchestrator batch` "
            "carries it out too, in its own environment)"
        )
    return "the next `orchestrator batch` carries it out; its environment decides DRY_RUN and the tools"


def _refuse_a_second_answer(services: Services, run_id: str) -> None:
    """UsageError when the decision the run waits on already has its answer, not yet
    carried out (``approve`` without ``--now``): answered is answered."""
    record = services.storage.runs.load(run_id)
    ref = pending_verdict(record)
    if record.state is not RunState.AWAITING_APPROVAL or ref is None:
        return  # answer_decision says why there is nothing to answer
    given = services.storage.approvals.read(run_id, ref.number)
    if given is None:
        return
    word = "approved" if given.approved else "rejected"
    raise UsageError(
        f"run {run_id}: verdict {ref.number} is already answered ({word} by {given.by}); "
        f"the next batch carries it out, or `orchestrator resume {run_id}` now"
    )


def answer(
    config_file: Path,
    state_dir_override: str | None,
    run_id: str,
    *,
    approved: bool,
    reason: str | None,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    now: bool = False,
) -> int:
    """Record the answer; drive the run here only for a reject (it ends) or ``now``."""
    loaded = load_config(config_file)
    services = terminal_services(loaded, state_dir_override, out, environ)
    store = services.storage.runs
    storage = services.storage
    run_id = resolve_run_id(store, run_id)
    ticket_id = ticket_of(run_id)
    if ticket_id is None:  # resolve_run_id returns recorded run ids only
        raise UsageError(f"{run_id!r} is not a run id")
    with storage.locks.ticket(ticket_id):
        _refuse_a_second_answer(services, run_id)
        answered = answer_decision(services, run_id, approved=approved, reason=reason, by=os_user())
    decided, approval, record = answered.decided, answered.approval, answered.record
    proposal = decided.proposal
    word = "approved" if approved else "rejected"
    out.write(
        f"{word}: verdict {decided.number} of {run_id} ({decided.action}, "
        f"routed {proposal.routing} at confidence {proposal.confidence}) by {approval.by}\n"
    )
    if approved and not now and on_a_fleet(loaded.config, environ):
        return hand_to_fleet(loaded, services, record, environ, out)
    if approved and not now:
        out.write(
            f"not carried out here: {next_batch(loaded.config, environ)}; to carry it out now, "
            f"in this shell: `orchestrator resume {run_id}`\n"
        )
        return EXIT_COMPLETED
    if approved:
        armed = "armed" if dry_run_armed(environ) else "false"
        out.write(
            f"carrying it out here (--now): this shell's environment decides DRY_RUN "
            f"(DRY_RUN is {armed} here) and the tools\n"
        )
    record = run_ticket(load_ticket(Path(record.ticket_snapshot)), services)
    return exit_code(record)
