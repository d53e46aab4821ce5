"""What a batch reports: one result per ticket, the merge of what several workers saw,
the summary, and the exit code (the worst outcome wins). Pure: no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from orchestrator.domain import errors
from orchestrator.storage.batch_budget import SharedBudget

STATE_ERROR = "state-error"  # its state could not be read or brought forward
# Worst first: the batch's exit code is the first of these that any ticket reached.
EXIT_PRIORITY: tuple[tuple[str, int], ...] = (
    ("interrupted", errors.EXIT_INTERRUPTED),
    (STATE_ERROR, errors.EXIT_STATE),
    ("failed", errors.EXIT_FAILED),
    ("refused", errors.EXIT_USAGE),
    ("needs-human", errors.EXIT_NEEDS_HUMAN),
    ("awaiting-approval", errors.EXIT_NEEDS_HUMAN),
    # An outage outlasted the back-off: nothing for a person yet; try again later.
    ("waiting-infra", errors.EXIT_LOCKED),
)
RESULT_PREFIX = '{"ticket"'
DRY_RUN_BLOCK = "dry_run_block"


def timestamp(moment: datetime) -> str:
    """UTC, ISO-8601, to the second: what a cron log's lines are sorted and grepped by."""
    return f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


@dataclass(frozen=True)
class TicketResult:
    ticket: str
    status: str  # a run state, or: already-<state>, skipped, refused, state-error, interrupted
    run_id: str | None
    detail: str
    seconds: float
    ran: bool  # this batch drove the ticket (rather than finding it done or locked)
    at: str = ""  # when the batch was done with the ticket (``timestamp``)
    halt: str | None = None  # the halt reason this batch's run of the ticket ended with
    # The failed stage's last error lines from its log, redacted (reading/error_lines.py).
    error_lines: tuple[str, ...] = ()
    # What an awaiting-approval run's decision proposes (queue.awaiting_summary).
    summary: str = ""

    def line(self) -> str:
        run = self.run_id or "-"
        tail = f"  {self.detail}" if self.detail else ""
        tail += f"; proposed: {self.summary}" if self.summary else ""
        at = f"{self.at} " if self.at else ""
        return f"{at}{self.ticket:<16} {self.status:<20} {run:<36} {self.seconds:7.2f}s{tail}"

    def lines(self) -> list[str]:
        """``line`` and under it the failed stage's own last words, indented."""
        return [self.line(), *(f"    | {said}" for said in self.error_lines)]


def dry_run_blocked(results: list[TicketResult]) -> list[str]:
    """The tickets whose run DRY_RUN stopped in this batch (not those found so earlier)."""
    return [r.ticket for r in results if r.ran and r.halt == DRY_RUN_BLOCK]


def dry_run_notice(results: list[TicketResult], at: str) -> str | None:
    """One line when DRY_RUN blocked a side-effectful stage in this batch: which tickets,
    and how to let them through. None when nothing was blocked."""
    blocked = dry_run_blocked(results)
    if not blocked:
        return None
    names = ", ".join(blocked)
    return (
        f"{at} DRY_RUN blocked a side-effectful stage of {len(blocked)} ticket(s) ({names}): "
        "DRY_RUN is decided by the environment that runs the ticket (the batch's; with "
        "--backend celery, the worker's); the next `DRY_RUN=false orchestrator batch` "
        "continues each at the stage that stopped it, or `DRY_RUN=false orchestrator resume "
        "RUN_ID` one now"
    )


def merge(reports: list[TicketResult]) -> list[TicketResult]:
    """Workers report every ticket they looked at: keep the one that ran it, else the
    one that found it done, else a skip."""
    rank = {True: 0, False: 1}
    best: dict[str, TicketResult] = {}
    for report in reports:
        current = best.get(report.ticket)
        key = (rank[report.ran], report.status == "skipped")
        if current is None or key < (rank[current.ran], current.status == "skipped"):
            best[report.ticket] = report
    return sorted(best.values(), key=lambda r: r.ticket)


def exit_code(results: list[TicketResult]) -> int:
    statuses = {r.status for r in results}
    for status, code in EXIT_PRIORITY:
        if status in statuses:
            return code
    return errors.EXIT_COMPLETED


def summary(
    batch_id: str, results: list[TicketResult], seconds: float, budget: SharedBudget
) -> dict[str, object]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    spend = budget.read()
    return {
        "batch": batch_id,
        "tickets": len(results),
        "counts": dict(sorted(counts.items())),
        "seconds": round(seconds, 3),
        "model_calls": spend.calls,
        "tokens": spend.input_tokens + spend.output_tokens,
        "estimated_cost_usd": spend.cost_usd,
    }


def worker_results(text: str) -> list[TicketResult]:
    """The results a worker printed (one JSON line per ticket), among anything else."""
    out = []
    for line in text.splitlines():
        if line.startswith(RESULT_PREFIX):
            fields = json.loads(line)
            fields["error_lines"] = tuple(fields.get("error_lines", ()))
            out.append(TicketResult(**fields))
    return out
