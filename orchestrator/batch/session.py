"""A batch as one use case, whichever backend runs its tickets: opened (its id, its
state, its queue from the tickets directory or the ``[[sources]]``, the approvals and
playbook promotions answered by issue comment) and closed (its summary, its record, its
exit code and its published page)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from orchestrator.app.services import Services
from orchestrator.batch.queue import queue
from orchestrator.batch.record import batch_record
from orchestrator.batch.results import (
    TicketResult,
    dry_run_blocked,
    dry_run_notice,
    exit_code,
    summary,
    timestamp,
)
from orchestrator.domain import errors
from orchestrator.domain.config import LoadedConfig
from orchestrator.storage import Spend, StateStorage, open_state
from orchestrator.storage.batch_budget import BATCH_ENV, SharedBudget
from orchestrator.storage.batch_record import (
    read_batch_queue,
    write_batch_queue,
    write_batch_record,
)

# The batch's page and metrics written when it ends (the CLI's ``--report``, ``--metrics``):
# False when one could not be written.
Publish = Callable[[], bool]


def new_batch_id(now: datetime) -> str:
    """A batch's id: its start in UTC, then four hex digits (two batches a second apart
    sort by time; two in the same second do not collide)."""
    return f"{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"


def batch_id_from(environ: Mapping[str, str], now: datetime) -> str:
    """A ``--jobs N`` worker's batch id is its parent's (``BATCH_ENV``); else a new one."""
    return environ.get(BATCH_ENV) or new_batch_id(now)


def listed(loaded: LoadedConfig, tickets_dir: Path) -> list[Path]:
    """The tickets directory's queue; with ``[[sources]]`` the queue is what they yield,
    once the batch is open (``open_batch``)."""
    return [] if loaded.config.sources else queue(tickets_dir)


@dataclass
class BatchSession:
    """One open batch: what its backend runs and what closing it needs."""

    batch_id: str
    backend: str
    loaded: LoadedConfig
    storage: StateStorage
    services: Services
    out: TextIO
    as_json: bool
    paths: list[Path]
    failed_sources: int = 0
    started: float = field(default_factory=time.monotonic)
    started_at: datetime | None = None

    def start(self, *, record: bool = True) -> datetime:
        """The batch's clock starts (and, unless ``record`` is False, its record)."""
        self.started = time.monotonic()
        self.started_at = self.services.clock()
        if record:
            self.record([])
        return self.started_at

    def record(
        self,
        results: list[TicketResult] | None,
        *,
        spend: Spend | None = None,
        ended: bool = False,
        interrupted: bool = False,
    ) -> None:
        """``batches/<id>/batch.json`` as it stands (an empty start has no results)."""
        assert self.started_at is not None, "start() first"
        write_batch_record(
            self.storage.layout,
            batch_record(
                self.batch_id, backend=self.backend, started_at=self.started_at,
                results=results, spend=spend,
                ended_at=self.services.clock() if ended else None, interrupted=interrupted,
            ),
        )  # fmt: skip

    def budget(self) -> SharedBudget:
        """The batch's model budget, from the storage that owns it (its workers share it)."""
        caps, prices = self.loaded.config.batch, self.loaded.config.prices
        return self.storage.batch_budget(self.batch_id, caps, prices)

    def show(self, result: TicketResult) -> None:
        """One ticket's result: its lines, or one JSON object."""
        if self.as_json:
            self.out.write(json.dumps(asdict(result)) + "\n")
        else:
            self.out.write("".join(f"{line}\n" for line in result.lines()))
        self.out.flush()


def open_batch(
    loaded: LoadedConfig,
    services: Services,
    paths: list[Path],
    *,
    backend: str,
    out: TextIO,
    as_json: bool,
    environ: Mapping[str, str],
    worker: bool = False,
    jobs: int = 1,
) -> BatchSession:
    """The batch's id and state; with ``[[sources]]`` its queue read from them (issues
    become ticket files) and the issue comments answered, once per batch: a ``--jobs N``
    worker (``worker``) runs the queue its batch took in and never asks a forge."""
    batch_id = batch_id_from(environ, datetime.now(UTC))
    storage = open_state(services.storage.runs.state_dir)
    failed_sources = 0
    if loaded.config.sources and worker:
        paths = read_taken_in(storage, batch_id)  # its batch read the sources, once
    elif loaded.config.sources:
        paths, failed_sources = take_in_sources(loaded, storage, environ, out, services.clock)
        answer_from_issue_comments(loaded, storage, services, out)
        if jobs > 1:  # its --jobs N workers run it as it is: the forges are asked once
            write_batch_queue(storage.layout, batch_id, paths)
    return BatchSession(
        batch_id, backend, loaded, storage, services, out, as_json, paths, failed_sources
    )


def close_batch(
    session: BatchSession,
    results: list[TicketResult],
    budget: SharedBudget,
    publish: Publish,
    *,
    interrupted: bool = False,
) -> int:
    """The summary, the final record, then the page: the batch's exit code (a source that
    could not be read: try again later; a page that could not be written: usage)."""
    seconds = time.monotonic() - session.started
    write_summary(
        session.out, session.batch_id, results, seconds, budget, session.services, session.as_json
    )
    session.record(results, spend=budget.read(), ended=True, interrupted=interrupted)
    code = exit_code(results)
    if session.failed_sources and code == errors.EXIT_COMPLETED:
        code = errors.EXIT_LOCKED  # a source could not be read: try again later
    if not publish():
        return code or errors.EXIT_USAGE
    return code


def close_queued(session: BatchSession, queued: list[TicketResult], publish: Publish) -> int:
    """A batch nobody waits for (``--no-wait``): its record says what was queued, its page
    too; a source that could not be read: cron tries again later."""
    session.record(queued)
    if not publish():
        return errors.EXIT_USAGE
    return errors.EXIT_LOCKED if session.failed_sources else errors.EXIT_COMPLETED


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


def read_taken_in(storage: StateStorage, batch_id: str) -> list[Path]:
    """A worker's queue: what its batch took in from the sources (``open_batch``)."""
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
