"""``orchestrator batch --backend celery [--tickets DIR] [--no-wait] [--json]``: the queue's
pending tickets handed to a fleet of workers (``orchestrator worker``) through Redis.

The same selection as the local batch: a ticket file that cannot be read, or whose id
another file also claims, is refused here with its reason; a ticket whose latest run is
terminal is reported as already so (but one DRY_RUN stopped is queued: the worker's
environment decides DRY_RUN, and a worker with ``DRY_RUN=false`` continues it, as a
local batch with it does; an answered approval is not terminal, so it is queued too,
and the worker carries the answer out); every other ticket is queued as one task
``orchestrator.run_ticket``, at most once while it is queued and not finished (a second
batch waits for the first one's task instead of queueing another). The worker decides
again under its claim, so a ticket finished in between is not run twice either.

By default the batch waits and prints the local batch's per-ticket lines, summary and
exit code; ``--no-wait`` (cron) prints what it queued and exits 0: a later ``batch`` or
``runs`` shows the results. No reachable broker: the preflight names it (password
masked), exit 2, nothing queued (with ``--no-preflight``: one line, exit 75).

With ``[[sources]]``, this process reads them (issues become ticket files under the state
dir, which the workers share) and answers approvals by issue comment once, after the
broker answered and before anything is queued; the workers run the files it took in and
never ask a forge themselves. A source that could not be read makes the batch exit 75.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from orchestrator.app.fleet_key import fleet_key_files
from orchestrator.app.resume import dry_run_blocked
from orchestrator.app.services import Services, build_services
from orchestrator.batch.celery.answers import Answers, Patience, lost_note
from orchestrator.batch.celery.celery_app import broker_keys, celery_app, queue_name
from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.batch.celery.requeue import task_ticket
from orchestrator.batch.celery.ticket_task import TASK_NAME
from orchestrator.batch.queue import duplicate_ids, queue_ids
from orchestrator.batch.results import STATE_ERROR, TicketResult, timestamp
from orchestrator.batch.session import close_batch, listed, open_batch
from orchestrator.cli.commands.doctor import gate
from orchestrator.cli.commands.report import check_destinations, publish_batch
from orchestrator.domain import errors
from orchestrator.domain.broker_url import broker_url_from
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import TicketError
from orchestrator.domain.lifecycle import is_terminal
from orchestrator.domain.tickets import load_ticket
from orchestrator.reports.display import QuietReporter
from orchestrator.storage import note_queued, open_state
from orchestrator.storage.redis import CoordinationStore

# How long Celery retries a Redis that does not answer, inside one call: the batch's wait
# retries with its own back-off, bounded by ``outage_wait_s``, so Celery's own retries
# (20 reconnections over about 19 s, by default) are kept short here.
BATCH_REDIS_PATIENCE_S = 1.0


def _settled(path: Path, services: Services, refused: Mapping[Path, str]) -> TicketResult | str:
    """What the batch can say about ``path`` without a worker (refused, or terminal
    already), else the ticket's id: it is to be queued (a run DRY_RUN stopped too, so
    that a worker whose DRY_RUN is false continues it)."""
    at = timestamp(services.clock())
    if path in refused:
        return TicketResult(path.name, "refused", None, refused[path], 0.0, False, at=at)
    try:
        ticket = load_ticket(path)
    except TicketError as exc:
        return TicketResult(path.name, "refused", None, str(exc), 0.0, False, at=at)
    latest = services.storage.runs.latest_for_ticket(ticket.id)
    # A run DRY_RUN stopped is the worker's to judge: its environment decides DRY_RUN.
    if latest is not None and is_terminal(latest.state) and not dry_run_blocked(latest):
        return TicketResult(ticket.id, f"already-{latest.state}", latest.run_id, "", 0.0, False, at=at)  # fmt: skip
    return ticket.id


def _note(to: TextIO, batch_id: str, ticket_id: str, line: str) -> None:
    """A line about one ticket's wait, on stderr: stdout stays the batch's own lines."""
    print(f"batch {batch_id}: ticket {ticket_id}: {line}", file=to, flush=True)


def _result_of(ticket_id: str, value: Any, services: Services) -> TicketResult:
    """A task's answer as the batch's result; a task that failed is a state error."""
    if isinstance(value, dict):
        fields = dict(value)
        fields["error_lines"] = tuple(fields.get("error_lines", ()))
        return TicketResult(**fields)
    return TicketResult(
        ticket_id, STATE_ERROR, None, f"worker error: {value}", 0.0, False,
        at=timestamp(services.clock()),
    )  # fmt: skip


def celery_batch(
    config_file: Path,
    state_dir_override: str | None,
    tickets_dir: Path,
    *,
    wait: bool,
    as_json: bool,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    wait_timeout_s: float | None = None,
    published: tuple[Path | None, Path | None] = (None, None),
    stderr: TextIO | None = None,
    preflight: bool = True,
) -> int:
    """``published``: where the batch's HTML report and metrics go when it ends (with
    ``--no-wait``, once its tickets are queued: the page then shows what was queued);
    ``preflight``: check this machine and the broker once, before anything is queued."""
    check_destinations((("batch --report", published[0]), ("batch --metrics", published[1])))
    loaded = load_config(config_file)
    # With [[sources]], the queue is what they yield, once the broker has answered.
    paths = listed(loaded, tickets_dir)
    if preflight:
        gate(loaded, state_dir_override, environ, stderr or sys.stderr, backend="celery")
    distributed = loaded.config.distributed
    url = broker_url_from(distributed.broker_url, environ, loaded.path)
    store = CoordinationStore(url, namespace=distributed.namespace)
    store.ping()  # unreachable: CoordinationUnavailable names it, masked; nothing queued
    services = build_services(loaded, state_dir_override, out, environ)
    services = replace(services, reporter=QuietReporter(out))
    answers = Answers(
        partial(
            celery_app, url, namespace=distributed.namespace, fleet=fleet_key_files(loaded),
            visibility_timeout_s=distributed.visibility_timeout_s,
            patience_s=BATCH_REDIS_PATIENCE_S,
        ),
        store,
        broker_keys(distributed.namespace),
        Patience(distributed.outage_wait_s, distributed.lost_task_check_s),
    )  # fmt: skip
    session = open_batch(
        loaded, services, paths, backend="celery", out=out, as_json=as_json, environ=environ
    )
    batch_id, paths = session.batch_id, session.paths
    enqueued = Enqueued(store)
    session.start()
    # What a worker on the shared disk will agree to run for this batch (issue 40).
    note_queued(services.storage.runs.state_dir, batch_id, paths)

    def publish(state_dir: Path, batch_id: str) -> bool:
        return publish_batch(state_dir, config_file, batch_id, *published, stderr or sys.stderr)

    results: list[TicketResult] = []
    waiting: list[tuple[str, str, Callable[[], object]]] = []
    sent: set[str] = set()
    refused = duplicate_ids(queue_ids(paths))
    for path in paths:
        settled = _settled(path, services, refused)
        if isinstance(settled, TicketResult):
            session.show(settled)
            results.append(settled)
            continue
        task_id = str(uuid.uuid4())
        earlier = enqueued.mark(settled, task_id, keep_s=distributed.visibility_timeout_s)
        ticket_file, ticket_dir = task_ticket(
            open_state(services.storage.root), path, tickets_dir, batch_id, settled,
            from_sources=bool(loaded.config.sources),
        )  # fmt: skip
        send = partial(
            answers.send,
            TASK_NAME,
            [settled, ticket_file, ticket_dir, batch_id],
            earlier or task_id,
            queue_name(distributed.namespace),
        )
        if earlier is None:
            try:
                send()
            except Exception:
                enqueued.done(settled, task_id)  # not queued: the next batch queues it
                raise
            sent.add(task_id)
        waiting.append((settled, earlier or task_id, send))
        if not wait:
            how = "queued" if earlier is None else "already queued"
            line = TicketResult(settled, how, None, f"task {earlier or task_id}", 0.0, False,
                                at=timestamp(services.clock()))  # fmt: skip
            session.show(line)
    if not wait:
        # Nobody waits for these: a task another batch queued whose message the broker
        # lost would be "already queued" until its mark expires (the visibility timeout).
        others = {task: (ticket, resend) for ticket, task, resend in waiting if task not in sent}
        for task_id in answers.confirm_lost(list(others)):
            ticket_id, resend = others[task_id]
            resend()
            _note(stderr or sys.stderr, batch_id, ticket_id, lost_note(task_id, answers.patience))
        out.write(
            f"{timestamp(services.clock())} batch {batch_id}: {len(waiting)} ticket(s) queued "
            f"on {url.masked}\n"
            if not as_json
            else json.dumps({"queued": [t for t, _, _ in waiting], "batch": batch_id}) + "\n"
        )
        queued = [
            TicketResult(t, "queued", None, f"task {task}", 0.0, False) for t, task, _ in waiting
        ]
        session.record(results + queued)
        if not publish(session.storage.root, batch_id):
            return errors.EXIT_USAGE
        # A source that could not be read: cron tries again later.
        return errors.EXIT_LOCKED if session.failed_sources else errors.EXIT_COMPLETED
    for ticket_id, task_id, resend in waiting:
        answer = answers.wait(
            task_id, resend=resend, timeout_s=wait_timeout_s,
            said=partial(_note, stderr or sys.stderr, batch_id, ticket_id),
        )  # fmt: skip
        result = _result_of(ticket_id, answer, services)
        session.show(result)
        results.append(result)
    # The storage owns the fleet's budget: PostgreSQL's, else Redis's (issue 30).
    budget = session.storage.fleet_batch_budget(
        store, batch_id, loaded.config.batch, loaded.config.prices
    )
    return close_batch(session, results, budget, publish)
