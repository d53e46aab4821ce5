"""The ticket queue, run in this process: every ticket file not yet terminal, one at a
time. Each ticket is claimed with its flock and its "already terminal?" check happens
under that lock (``run_ticket(..., unfinished_only=True)``), so overlapping batches never
run a ticket twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.app.driver import run_ticket
from orchestrator.batch.results import STATE_ERROR, TicketResult
from orchestrator.domain import errors
from orchestrator.domain.errors import (
    IllegalTransition,
    Interrupted,
    StateError,
    TicketError,
    TicketLocked,
)
from orchestrator.domain.lifecycle import RunState, is_terminal
from orchestrator.domain.tickets import load_ticket
from orchestrator.execution.attempts import Services
from orchestrator.storage.ticket_queue import ticket_files


def queue(tickets_dir: Path) -> list[Path]:
    if not tickets_dir.is_dir():
        raise errors.UsageError(f"batch: {tickets_dir}: not a directory of tickets")
    return ticket_files(tickets_dir)


def run_one(path: Path, services: Services) -> TicketResult:
    started = time.monotonic()

    def result(
        ticket: str, status: str, run_id: str | None, detail: str, ran: bool
    ) -> TicketResult:
        return TicketResult(
            ticket, status, run_id, detail, round(time.monotonic() - started, 3), ran
        )

    try:
        ticket = load_ticket(path)
    except TicketError as exc:
        return result(path.name, "refused", None, str(exc), False)
    try:
        before = services.store.latest_for_ticket(ticket.id)
        record = run_ticket(ticket, services, unfinished_only=True)
    except TicketLocked as exc:
        return result(ticket.id, "skipped", None, str(exc), False)
    except (StateError, IllegalTransition) as exc:
        # A state file that cannot be read or brought forward: report it (its path and
        # the reason) and go on; the batch's exit code says a person must look.
        return result(ticket.id, STATE_ERROR, None, str(exc), False)
    if before is not None and is_terminal(before.state) and record == before:
        return result(ticket.id, f"already-{record.state}", record.run_id, "", False)
    detail = ""
    if record.halt is not None:
        detail = f"{record.halt.reason} at {record.halt.stage}"
    elif record.state is RunState.AWAITING_APPROVAL:
        detail = f"orchestrator approve {record.run_id}"
    elif record.state is RunState.RECOVERING:
        # Left undecided (the batch's model budget is spent): the next batch decides it.
        return result(
            ticket.id, "deferred", record.run_id, "model budget spent; the next batch decides it",
            True,
        )  # fmt: skip
    return result(ticket.id, str(record.state), record.run_id, detail, True)


def run_queue(
    paths: list[Path],
    services: Services,
    emit: Callable[[TicketResult], None],
    results: list[TicketResult],
) -> None:
    """Run the queue in this process, appending to ``results`` as it goes (so what was
    done is still reported when a signal stops it halfway)."""
    for path in paths:
        try:
            outcome = run_one(path, services)
        except Interrupted:
            outcome = TicketResult(
                path.stem, "interrupted", None, "state saved; the next batch resumes", 0.0, True
            )
            emit(outcome)
            results.append(outcome)
            raise
        emit(outcome)
        results.append(outcome)
