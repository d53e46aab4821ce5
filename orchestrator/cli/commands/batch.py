"""``orchestrator batch [--tickets DIR] [--jobs N] [--json]``: every ticket in the queue
that has not reached a terminal state, N at a time. Built for cron.

* Overlap-safe: each ticket is claimed with its flock (released by the OS if we die) and
  its "already terminal?" check happens under that lock, so a second batch started while
  the first runs skips what the first holds (``skipped: locked by pid N``) and never
  repeats what it finished.
* ``--jobs 1`` runs tickets in this process. ``--jobs N`` starts N worker processes
  (through the runner), each walking the queue and claiming tickets the same way.
* With ``[[sources]]``, this process reads them (issues become ticket files) and answers
  approvals by issue comment once, before any ticket runs; ``--jobs N`` workers run the
  queue it took in (``batches/<id>/queue.json``) and never ask a forge themselves.
* SIGTERM/SIGINT: running stages are stopped through the runner's TERM→KILL path, state
  is saved, and the batch exits 130; the next batch resumes.
* A ticket that cannot be read, or whose state cannot be read or brought forward, is
  reported with its path and the reason, and the batch goes on; a state error makes
  the batch exit 7.
* One model budget per batch (``[batch]``): once spent, remaining diagnoses become
  synthetic abandon-human instead of calls.
* Its record (``batches/<id>/batch.json``: each ticket's result and run, its spend) is
  written when it starts and when it ends; ``--report PATH`` and ``--metrics PATH`` then
  write its HTML page and its Prometheus figures (cron leaves both behind every batch).
* Every line starts with its UTC time (a cron log is read by time); a ticket that failed
  is followed by its failed stage's last error lines; when DRY_RUN blocked something in
  this batch, one line says so and how to let it through.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from orchestrator.app.budgeted_calls import budgeted_factory
from orchestrator.app.refused_key import RefusedKeyLatch
from orchestrator.app.services import Services, build_services
from orchestrator.batch.queue import queue, run_queue
from orchestrator.batch.record import batch_record
from orchestrator.batch.results import (
    TicketResult,
    dry_run_blocked,
    dry_run_notice,
    exit_code,
    summary,
    timestamp,
)
from orchestrator.batch.session import batch_id_from
from orchestrator.batch.workers import Stopped, run_workers
from orchestrator.cli.commands.doctor import gate
from orchestrator.cli.commands.report import check_destinations, publish_batch
from orchestrator.domain import errors
from orchestrator.domain.config import LoadedConfig, load_config
from orchestrator.domain.errors import Interrupted
from orchestrator.recovery.gateway import GatewayFactory
from orchestrator.reports.display import QuietReporter
from orchestrator.storage import (
    SharedBudget,
    StateStorage,
    open_state,
    read_batch_queue,
    write_batch_queue,
    write_batch_record,
)


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
    published: tuple[Path | None, Path | None] = (None, None),
    stderr: TextIO | None = None,
    preflight: bool = True,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> int:
    """``gateway_factory`` replaces the configured model (tests script it); ``clock`` and
    ``sleep`` the batch's time (a test's own: a back-off, an outage's age); ``published``
    is where the batch's HTML report and metrics go when it ends (``--report``,
    ``--metrics``); ``preflight``: check the machine once, before any ticket (a
    ``--jobs N`` worker does not: its batch did)."""
    if jobs < 1:
        raise errors.UsageError("batch: --jobs must be at least 1")
    check_destinations((("batch --report", published[0]), ("batch --metrics", published[1])))
    loaded = load_config(config_file)
    # With [[sources]], the queue is what they yield, once the state dir is known.
    paths = [] if loaded.config.sources else queue(tickets_dir)
    if preflight:
        gate(loaded, state_dir_override, environ, stderr or sys.stderr)
    services = build_services(loaded, state_dir_override, out, environ)
    if clock is not None:
        services = replace(services, clock=clock)
    if sleep is not None:
        services = replace(services, sleep=sleep)
    batch_id = batch_id_from(environ, datetime.now(UTC))
    storage = open_state(services.storage.runs.state_dir)
    budget = storage.batch_budget(batch_id, loaded.config.batch, loaded.config.prices)
    failed_sources = 0
    if loaded.config.sources and worker:
        paths = read_taken_in(storage, batch_id)  # its batch read the sources, once
    elif loaded.config.sources:
        paths, failed_sources = take_in_sources(loaded, storage, environ, out, services.clock)
        answer_from_issue_comments(loaded, storage, services, out)
        if jobs > 1:
            write_taken_in(storage, batch_id, paths)

    def say(line: str) -> None:
        print(f"batch: {line}", file=out, flush=True)

    services = replace(
        services,
        reporter=QuietReporter(out),
        notifier=services.notifier.saying(say),
        gateway_factory=budgeted_factory(
            RefusedKeyLatch(
                gateway_factory or services.gateway_factory,
                loaded.config.model.api_key_env,
                say=say,
            ),
            budget,
        ),
    )

    if not worker:  # notices an earlier batch did not get out (its parent's job for a worker)
        services.notifier.catch_up()

    started = time.monotonic()
    started_at = services.clock()
    reported: list[TicketResult] = []

    def record_progress() -> None:
        # After each ticket too: a batch killed halfway still says which runs it touched.
        if not worker:  # a --jobs N worker is part of its parent's batch, which records it
            write_batch_record(
                storage.layout,
                batch_record(batch_id, backend="local", started_at=started_at, results=reported),
            )

    def emit(result: TicketResult) -> None:
        if worker or as_json:
            out.write(json.dumps(asdict(result)) + "\n")
        else:
            out.write("".join(f"{line}\n" for line in result.lines()))
        out.flush()
        reported.append(result)
        record_progress()

    record_progress()
    results: list[TicketResult] = []
    interrupted = False
    try:
        if jobs == 1 or worker:
            run_queue(paths, services, emit, results)
        else:
            results = run_workers(
                jobs, config_file, services, tickets_dir, batch_id, storage.layout, environ
            )
            for result in results:
                emit(result)
    except Stopped as stopped:
        interrupted = True
        results = stopped.results
        for result in results:
            emit(result)
    except Interrupted:
        interrupted = True
    if worker:
        return errors.EXIT_INTERRUPTED if interrupted else exit_code(results)
    if interrupted and not any(r.status == "interrupted" for r in results):
        last = TicketResult(
            "-", "interrupted", None, "state saved; the next batch resumes", 0.0, True,
            at=timestamp(services.clock()),
        )  # fmt: skip
        results.append(last)
    write_summary(out, batch_id, results, time.monotonic() - started, budget, services, as_json)
    write_batch_record(
        storage.layout,
        batch_record(
            batch_id, backend="local", started_at=started_at, results=results,
            spend=budget.read(), ended_at=services.clock(), interrupted=interrupted,
        ),
    )  # fmt: skip
    code = exit_code(results)
    if failed_sources and code == errors.EXIT_COMPLETED:
        code = errors.EXIT_LOCKED  # a source could not be read: try again later
    if not publish_batch(storage.root, config_file, batch_id, *published, stderr or sys.stderr):
        return code or errors.EXIT_USAGE
    return code


def take_in_sources(
    loaded: LoadedConfig,
    storage: StateStorage,
    environ: Mapping[str, str],
    out: TextIO,
    clock: Callable[[], datetime],
) -> tuple[list[Path], int]:
    """Read every ``[[sources]]`` (forge issues become ticket files first): the files
    to queue, and how many sources could not be read (each said in one line)."""
    from orchestrator.app.intake import gather

    paths: list[Path] = []
    failed = 0
    wait_s = loaded.config.recovery.forge_max_wait_s
    for report in gather(loaded.config.sources, loaded.root, storage, environ=environ,
                         max_wait_s=wait_s):  # fmt: skip
        if report.error is not None:
            failed += 1
            out.write(f"{timestamp(clock())} source {report.source} ({report.kind}): "
                      f"FAILED: {report.error}\n")  # fmt: skip
        paths += report.queued
    out.flush()
    return paths, failed


def write_taken_in(storage: StateStorage, batch_id: str, paths: list[Path]) -> None:
    """The queue the sources yielded, for this batch's ``--jobs N`` workers: they run it
    as it is, so the forges are asked once per batch, not once per worker. Written before
    any worker starts, and never again."""
    write_batch_queue(storage.layout, batch_id, paths)


def read_taken_in(storage: StateStorage, batch_id: str) -> list[Path]:
    """A worker's queue: what its batch took in from the sources (``write_taken_in``)."""
    path = storage.layout.batch_queue_path(batch_id)
    try:
        listed = read_batch_queue(storage.layout, batch_id)
    except (OSError, ValueError) as exc:
        raise errors.UsageError(
            f"batch --worker: cannot read the queue its batch took in from [[sources]] "
            f"({path}): {exc}; a worker never reads the sources itself"
        ) from None
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise errors.UsageError(f"batch --worker: {path}: not a list of ticket paths")
    return [Path(p) for p in listed]


def answer_from_issue_comments(
    loaded: LoadedConfig, storage: StateStorage, services: Services, out: TextIO
) -> None:
    """Paused runs answered by ``/orchestrator approve|reject`` on their issues, and
    proposed playbook entries promoted by ``/orchestrator playbook promote``, before the
    queue runs (which then carries the answers out); one line per comment weighed."""
    from orchestrator.app.comment_approvals import answer_from_comments
    from orchestrator.domain.sources import DirectorySource

    forge_sources = [s for s in loaded.config.sources if not isinstance(s, DirectorySource)]
    for line in answer_from_comments(forge_sources, storage, services):
        out.write(f"{timestamp(services.clock())} {line}\n")
    # and proposed playbook entries promoted by `/orchestrator playbook promote ID` (issue 44)
    from orchestrator.app.comment_approvals import promote_from_comments
    from orchestrator.app.playbook import store_for

    promoted = promote_from_comments(
        forge_sources, storage, store_for(loaded.root), environ=services.environ,
        clock=services.clock, max_wait_s=loaded.config.recovery.forge_max_wait_s,
    )  # fmt: skip
    for line in promoted:
        out.write(f"{timestamp(services.clock())} {line}\n")
    out.flush()


def write_summary(
    out: TextIO,
    batch_id: str,
    results: list[TicketResult],
    seconds: float,
    budget: SharedBudget,
    services: Services,
    as_json: bool,
) -> None:
    """The batch's closing lines: the DRY_RUN notice, then the counts and the spend."""
    report = summary(batch_id, results, seconds, budget)
    at = timestamp(services.clock())
    notice = dry_run_notice(results, at)
    if as_json:
        report["at"] = at
        report["dry_run_blocked"] = dry_run_blocked(results)
        out.write(json.dumps({"summary": report}) + "\n")
    else:
        if notice is not None:
            out.write(notice + "\n")
        counts = ", ".join(f"{n} {s}" for s, n in report["counts"].items()) or "no tickets"  # type: ignore[attr-defined]
        out.write(
            f"{at} batch {batch_id}: {report['tickets']} ticket(s): {counts} in "
            f"{report['seconds']}s; model calls {report['model_calls']}, tokens "
            f"{report['tokens']}, ~${report['estimated_cost_usd']}\n"
        )
