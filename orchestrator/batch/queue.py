"""The ticket queue, run in this process: every ticket file not yet terminal, one at a
time. Each ticket is claimed with its flock and its "already terminal?" check happens
under that lock (``run_unfinished``, which also says whether this batch drove it), so
overlapping batches never run a ticket twice, nor both report it as theirs.

Two files claiming one ticket id are both refused, each naming the other, and the rest of
the queue runs: which file is "the" ticket is a person's call, and guessing (the first by
name) would run one file and silently never the other, while refusing the whole batch
would stop every other ticket over one mistake. A refusal makes the batch exit non-zero,
so cron's monitoring hears of it.

A run stopped only by DRY_RUN (``dry_run_block``) is not done for a batch that may do
what it was stopped before: the first batch whose environment has ``DRY_RUN=false``
resumes it from the blocked stage (``resume_dry_run_block``: once, under the ticket's
lock). A batch where DRY_RUN is still armed says so on the ticket's line, naming whose
environment decides: the batch's here, the worker's on a fleet (``decides``). A run whose
answer a person recorded (``approve``) is not terminal: the next batch carries it out.
Nor is a run that waits out an outage (``waiting-infra``, issue 43): the next batch goes
on from the stage that failed, or tells a person once the outage is too old.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from orchestrator.app.driver import run_unfinished
from orchestrator.app.resume import ResumeRefused, resume_dry_run_block
from orchestrator.app.services import Services
from orchestrator.batch.results import DRY_RUN_BLOCK, STATE_ERROR, TicketResult, timestamp
from orchestrator.domain import errors
from orchestrator.domain.errors import (
    IllegalTransition,
    Interrupted,
    StateError,
    TicketError,
    TicketLocked,
)
from orchestrator.domain.lifecycle import (
    RunState,
    batch_resumes,
    dry_run_armed,
    dry_run_continuation,
    later_batch_may_resume,
)
from orchestrator.domain.runs import RunRecord, pending_verdict
from orchestrator.domain.tickets import load_ticket
from orchestrator.reading.error_lines import error_lines_of
from orchestrator.redaction import redact
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.ticket_queue import ticket_files


def queue(tickets_dir: Path) -> list[Path]:
    if not tickets_dir.is_dir():
        raise errors.UsageError(f"batch: {tickets_dir}: not a directory of tickets")
    return ticket_files(tickets_dir)


def duplicate_ids(ids: Mapping[Path, str]) -> dict[Path, str]:
    """For every file whose ticket id another file of the queue also claims: why it is
    refused, naming the others. Pure."""
    claimants: dict[str, list[Path]] = {}
    for path, ticket_id in ids.items():
        claimants.setdefault(ticket_id, []).append(path)
    refused = {}
    for ticket_id, paths in claimants.items():
        if len(paths) < 2:
            continue
        for path in paths:
            others = ", ".join(str(p.resolve()) for p in sorted(paths) if p != path)
            refused[path] = (
                f"ticket error: {path.resolve()}: id {ticket_id!r} is also the id of {others}; "
                "rename or remove one of them (none of them is run until then)"
            )
    return refused


def queue_ids(paths: list[Path]) -> dict[Path, str]:
    """The id each readable ticket file claims (a malformed one is refused on its turn)."""
    ids = {}
    for path in paths:
        try:
            ids[path] = load_ticket(path).id
        except TicketError:
            continue
    return ids


def _error_lines(record: RunRecord) -> tuple[str, ...]:
    """The last error lines of the stage the run ended failing in (not on a DRY_RUN block
    or a decision after a later success), for under its line."""
    if record.state == "completed" or not record.attempts:
        return ()
    last = max(record.attempts, key=lambda a: a.number)
    return () if last.ok else tuple(error_lines_of(last.failed_log))


AWAITING_SUMMARY_CHARS = 200


def awaiting_summary(record: RunRecord, *, limit: int = AWAITING_SUMMARY_CHARS) -> str:
    """What the decision an awaiting-approval run waits on proposes: its verdict's
    summary, redacted, on one line, cut to ``limit`` characters ("" when the run waits on
    nothing or its verdict file cannot be read: the line still names the command)."""
    pending = pending_verdict(record)
    if record.state != "awaiting-approval" or pending is None:
        return ""
    path = StateLayout.of_run_dir(Path(record.run_dir)).verdict_path(record.run_id, pending.number)
    try:
        summary = read_verdict(path).verdict.summary
    except (StateError, OSError):
        return ""
    text = " ".join(redact(summary).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


BATCH_ENVIRONMENT = "the batch's"
WORKER_ENVIRONMENT = "the worker's"


def still_blocked(record: RunRecord, decides: str) -> str:
    """The line's detail for a run DRY_RUN stopped and still stops in this batch."""
    stage = record.halt.stage if record.halt else None
    return (
        f"blocked by DRY_RUN at {stage!r}: DRY_RUN is armed in {decides} environment, "
        f"which decides; {dry_run_continuation(record.run_id)}"
    )


def waiting_detail(record: RunRecord, max_h: float) -> str:
    """The line's detail for a run that waits out an outage (``waiting-infra``)."""
    stage = record.halt.stage if record.halt else record.current_stage
    return (
        f"waiting out an outage at {stage!r}: the next batch goes on from there, its caps "
        f"untouched; a person is told once it has lasted {max_h:g} h"
    )


def run_one(
    path: Path,
    services: Services,
    refused: Mapping[Path, str] | None = None,
    *,
    decides: str = BATCH_ENVIRONMENT,
) -> TicketResult:
    """Run one queued ticket file unless ``refused`` names it (see ``duplicate_ids``).
    ``decides``: whose environment ``services.environ`` is, for the lines that say so."""
    started = time.monotonic()
    refused = refused or {}

    def result(
        ticket: str, status: str, run_id: str | None, detail: str, ran: bool,
        record: RunRecord | None = None,
    ) -> TicketResult:  # fmt: skip
        halt = record.halt.reason.value if record is not None and record.halt else None
        return TicketResult(
            ticket, status, run_id, detail, round(time.monotonic() - started, 3), ran,
            at=timestamp(services.clock()), halt=halt,
            error_lines=_error_lines(record) if record is not None and ran else (),
            summary=awaiting_summary(record) if record is not None else "",
        )  # fmt: skip

    if path in refused:
        return result(path.name, "refused", None, refused[path], False)
    try:
        ticket = load_ticket(path)
    except TicketError as exc:
        return result(path.name, "refused", None, str(exc), False)
    try:
        record, drove = run_unfinished(ticket, services)
        halt = record.halt.reason if record.halt else None
        if not drove and later_batch_may_resume(record.state, halt):
            if not batch_resumes(record.state, halt, dry_run=dry_run_armed(services.environ)):
                return result(
                    ticket.id, f"already-{record.state}", record.run_id,
                    still_blocked(record, decides), False,
                )  # fmt: skip
            record, drove = resume_dry_run_block(services, record.run_id)
    except (TicketError, ResumeRefused) as exc:
        # Found wanting once it was to run (its repository), or a blocked run that cannot
        # go on (its clone is gone).
        return result(ticket.id, "refused", None, str(exc), False)
    except TicketLocked as exc:
        return result(ticket.id, "skipped", None, str(exc), False)
    except (StateError, IllegalTransition) as exc:
        # A state file that cannot be read or brought forward: report it (its path and
        # the reason) and go on; the batch's exit code says a person must look.
        return result(ticket.id, STATE_ERROR, None, str(exc), False)
    if not drove:  # ended before this batch took its lock (here or in another batch)
        return result(ticket.id, f"already-{record.state}", record.run_id, "", False)
    detail = ""
    if record.halt is not None and record.halt.reason.value == DRY_RUN_BLOCK:
        detail = still_blocked(record, decides)
    elif record.state is RunState.WAITING_INFRA:
        detail = waiting_detail(record, services.loaded.config.recovery.infra_wait_max_h)
    elif record.halt is not None:
        detail = f"{record.halt.reason} at {record.halt.stage}"
    elif record.state is RunState.AWAITING_APPROVAL:
        detail = f"orchestrator approve {record.run_id}"
    elif record.state is RunState.RECOVERING:
        # Left undecided (the batch's model budget is spent): the next batch decides it.
        return result(
            ticket.id, "deferred", record.run_id, "model budget spent; the next batch decides it",
            True,
        )  # fmt: skip
    return result(ticket.id, str(record.state), record.run_id, detail, True, record)


def run_queue(
    paths: list[Path],
    services: Services,
    emit: Callable[[TicketResult], None],
    results: list[TicketResult],
) -> None:
    """Run the queue in this process, appending to ``results`` as it goes (so what was
    done is still reported when a signal stops it halfway)."""
    refused = duplicate_ids(queue_ids(paths))
    for path in paths:
        try:
            outcome = run_one(path, services, refused)
        except Interrupted:
            outcome = TicketResult(
                path.stem, "interrupted", None, "state saved; the next batch resumes", 0.0,
                True, at=timestamp(services.clock()),
            )  # fmt: skip
            emit(outcome)
            results.append(outcome)
            raise
        emit(outcome)
        results.append(outcome)
