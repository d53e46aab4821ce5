"""``orchestrator batch [--tickets DIR] [--jobs N] [--json]``: every ticket in the queue
that has not reached a terminal state, N at a time. Built for cron.

* Overlap-safe: each ticket is claimed with its flock (released by the OS if we die) and
  its "already terminal?" check happens under that lock, so a second batch started while
  the first runs skips what the first holds (``skipped: locked by pid N``) and never
  repeats what it finished.
* ``--jobs 1`` runs tickets in this process. ``--jobs N`` starts N worker processes
  (through the runner), each walking the queue and claiming tickets the same way.
* SIGTERM/SIGINT: running stages are stopped through the runner's TERM→KILL path, state
  is saved, and the batch exits 130; the next batch resumes.
* A ticket that cannot be read, or whose state file is corrupt, is reported with its
  path and the reason, and the batch goes on.
* One model budget per batch (``[batch]``): once spent, remaining diagnoses become
  synthetic abandon-human instead of calls.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from orchestrator.app.driver import run_ticket
from orchestrator.cli.commands.run import build_services
from orchestrator.domain import errors
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import Interrupted, StateError, TicketError, TicketLocked
from orchestrator.domain.lifecycle import RunState, is_terminal
from orchestrator.domain.tickets import load_ticket
from orchestrator.execution import runner
from orchestrator.execution.attempts import Services
from orchestrator.recovery.gateway import GatewayFactory
from orchestrator.reports.display import QuietReporter
from orchestrator.storage.batch_budget import BATCH_ENV, BatchBudget, budgeted_factory
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import StateLayout

# Worst first: the batch's exit code is the first of these that any ticket reached.
EXIT_PRIORITY: tuple[tuple[str, int], ...] = (
    ("interrupted", errors.EXIT_INTERRUPTED),
    ("failed", errors.EXIT_FAILED),
    ("refused", errors.EXIT_USAGE),
    ("needs-human", errors.EXIT_NEEDS_HUMAN),
    ("awaiting-approval", errors.EXIT_NEEDS_HUMAN),
)
RESULT_PREFIX = '{"ticket"'


@dataclass(frozen=True)
class TicketResult:
    ticket: str
    status: str  # a run state, or: already-<state>, skipped, refused, interrupted
    run_id: str | None
    detail: str
    seconds: float
    ran: bool  # this batch drove the ticket (rather than finding it done or locked)

    def line(self) -> str:
        run = self.run_id or "-"
        tail = f"  {self.detail}" if self.detail else ""
        return f"{self.ticket:<16} {self.status:<20} {run:<36} {self.seconds:7.2f}s{tail}"


def queue(tickets_dir: Path) -> list[Path]:
    if not tickets_dir.is_dir():
        raise errors.UsageError(f"batch: {tickets_dir}: not a directory of tickets")
    return sorted(p for p in tickets_dir.glob("*.md") if p.is_file())


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
    except StateError as exc:  # a corrupt or hand-edited state file: report it, go on
        return result(ticket.id, "skipped", None, str(exc), False)
    if before is not None and is_terminal(before.state) and record == before:
        return result(ticket.id, f"already-{record.state}", record.run_id, "", False)
    detail = ""
    if record.halt is not None:
        detail = f"{record.halt.reason} at {record.halt.stage}"
    elif record.state is RunState.AWAITING_APPROVAL:
        detail = f"orchestrator approve {record.run_id}"
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
    batch_id: str, results: list[TicketResult], seconds: float, budget: BatchBudget
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


def _worker_results(log: Path) -> list[TicketResult]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(RESULT_PREFIX):
            out.append(TicketResult(**json.loads(line)))
    return out


def batch(
    config_file: Path,
    state_dir_override: str | None,
    tickets_dir: Path,
    *,
    jobs: int,
    as_json: bool,
    worker: bool,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    gateway_factory: GatewayFactory | None = None,
) -> int:
    """``gateway_factory`` replaces the configured model (tests script it)."""
    if jobs < 1:
        raise errors.UsageError("batch: --jobs must be at least 1")
    loaded = load_config(config_file)
    paths = queue(tickets_dir)
    services = build_services(loaded, state_dir_override, out, environ)
    batch_id = (
        environ.get(BATCH_ENV) or f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    )
    storage = FileStorage(services.store.state_dir)
    budget = storage.batch_budget(batch_id, loaded.config.batch, loaded.config.prices)
    services = Services(
        **{
            **services.__dict__,
            "reporter": QuietReporter(out),
            "gateway_factory": budgeted_factory(
                gateway_factory or services.gateway_factory, budget
            ),
        }
    )

    def emit(result: TicketResult) -> None:
        if worker or as_json:
            out.write(json.dumps(asdict(result)) + "\n")
        else:
            out.write(result.line() + "\n")
        out.flush()

    started = time.monotonic()
    results: list[TicketResult] = []
    interrupted = False
    try:
        if jobs == 1 or worker:
            run_queue(paths, services, emit, results)
        else:
            results = _run_workers(
                jobs, config_file, services, tickets_dir, batch_id, storage.layout, environ
            )
            for result in results:
                emit(result)
    except _Stopped as stopped:
        interrupted = True
        results = stopped.results
        for result in results:
            emit(result)
    except Interrupted:
        interrupted = True
    if worker:
        return errors.EXIT_INTERRUPTED if interrupted else exit_code(results)
    if interrupted and not any(r.status == "interrupted" for r in results):
        results.append(
            TicketResult("-", "interrupted", None, "state saved; the next batch resumes", 0.0, True)
        )
    report = summary(batch_id, results, time.monotonic() - started, budget)
    if as_json:
        out.write(json.dumps({"summary": report}) + "\n")
    else:
        counts = ", ".join(f"{n} {s}" for s, n in report["counts"].items()) or "no tickets"  # type: ignore[attr-defined]
        out.write(
            f"batch {batch_id}: {report['tickets']} ticket(s): {counts} in {report['seconds']}s; "
            f"model calls {report['model_calls']}, tokens {report['tokens']}, "
            f"~${report['estimated_cost_usd']}\n"
        )
    return exit_code(results)


def _run_workers(
    jobs: int,
    config_file: Path,
    services: Services,
    tickets_dir: Path,
    batch_id: str,
    layout: StateLayout,
    environ: Mapping[str, str],
) -> list[TicketResult]:
    """N worker processes, started (and, on SIGTERM, stopped) through the runner."""
    argv = (
        sys.executable, "-m", "orchestrator", "--config", str(config_file),
        "--state-dir", str(services.store.state_dir), "batch", "--worker",
        "--tickets", str(tickets_dir.resolve()),
    )  # fmt: skip
    env = {**environ, BATCH_ENV: batch_id}
    # A worker given TERM stops its stage (TERM, grace, KILL) and saves: give it that long.
    grace = max(s.kill_after_s for s in services.loaded.config.stages) + 10.0
    cancel = threading.Event()
    logs = [layout.batch_worker_log(batch_id, k + 1) for k in range(jobs)]

    def work(log: Path) -> runner.ProcessOutcome:
        return services.executor.run(
            argv, cwd=Path.cwd(), env=env, log_path=log,
            timeout_s=7 * 24 * 3600, kill_after_s=grace, cancel=cancel,
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(work, log) for log in logs]
        try:
            wait(futures)
        except Interrupted:
            cancel.set()
            wait(futures)
            merged = merge([r for log in logs if log.exists() for r in _worker_results(log)])
            raise _Stopped(merged) from None
    return merge([r for log in logs if log.exists() for r in _worker_results(log)])


class _Stopped(Interrupted):
    def __init__(self, results: list[TicketResult]) -> None:
        super().__init__(15)
        self.results = results
