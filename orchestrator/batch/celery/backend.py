"""The Celery backend of a batch: its open session's queue handed to a fleet of workers
(``orchestrator worker``) through Redis, one task per ticket that is neither refused nor
terminal already, and (unless ``--no-wait``) each task's answer waited for (what is
refused, queued and said: ``cli/commands/batch_celery.py``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from orchestrator.app.fleet_key import fleet_key_files
from orchestrator.app.resume import dry_run_blocked
from orchestrator.app.services import Services
from orchestrator.batch.celery.celery_app import broker_keys, celery_app, queue_name
from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.batch.celery.requeue import task_ticket
from orchestrator.batch.celery.task_results import TaskResults, WaitPolicy, lost_note
from orchestrator.batch.celery.ticket_task import TASK_NAME
from orchestrator.batch.queue import duplicate_ids, queue_ids
from orchestrator.batch.results import STATE_ERROR, TicketResult, timestamp
from orchestrator.batch.session import BatchSession
from orchestrator.domain.broker_url import BrokerUrl, broker_url_from
from orchestrator.domain.config import LoadedConfig
from orchestrator.domain.errors import TicketError
from orchestrator.domain.lifecycle import is_terminal
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage import open_state
from orchestrator.storage.batch_budget import SharedBudget
from orchestrator.storage.fleet_queue import note_queued
from orchestrator.storage.redis import CoordinationStore, fleet_batch_budget

# How long Celery retries a Redis that does not answer, inside one call: the batch's wait
# retries with its own back-off, bounded by ``outage_wait_s``, so Celery's own retries
# (20 reconnections over about 19 s, by default) are kept short here.
BATCH_REDIS_PATIENCE_S = 1.0

# One ticket handed to the fleet: its id, its task's id, and how to send that task again.
Waiting = tuple[str, str, Callable[[], object]]


def settled(path: Path, services: Services, refused: Mapping[Path, str]) -> TicketResult | str:
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


@dataclass(frozen=True)
class CeleryBackend:
    """A fleet that answered: its broker, its coordination store, its tasks' answers."""

    loaded: LoadedConfig
    url: BrokerUrl
    store: CoordinationStore
    answers: TaskResults
    stderr: TextIO

    @classmethod
    def connect(
        cls, loaded: LoadedConfig, environ: Mapping[str, str], stderr: TextIO
    ) -> CeleryBackend:
        """The broker, pinged: unreachable, ``CoordinationUnavailable`` names it (masked)
        and nothing is queued."""
        distributed = loaded.config.distributed
        url = broker_url_from(distributed.broker_url, environ, loaded.path)
        store = CoordinationStore(url, namespace=distributed.namespace)
        store.ping()
        answers = TaskResults(
            partial(
                celery_app, url, namespace=distributed.namespace, fleet=fleet_key_files(loaded),
                visibility_timeout_s=distributed.visibility_timeout_s,
                patience_s=BATCH_REDIS_PATIENCE_S,
            ),
            store,
            broker_keys(distributed.namespace),
            WaitPolicy(distributed.outage_wait_s, distributed.lost_task_check_s),
        )  # fmt: skip
        return cls(loaded, url, store, answers, stderr)

    def budget(self, session: BatchSession) -> SharedBudget:
        """What the workers charged: the storage owns the fleet's budget (issue 30)."""
        caps, prices = self.loaded.config.batch, self.loaded.config.prices
        return fleet_batch_budget(session.storage, self.store, session.batch_id, caps, prices)

    def run(
        self, session: BatchSession, tickets_dir: Path, *, wait: bool, timeout_s: float | None
    ) -> list[TicketResult]:
        """Each ticket's result (with ``wait``), else what was settled and what was queued."""
        # What a worker on the shared disk will agree to run for this batch (issue 40).
        note_queued(session.storage.root, session.batch_id, session.paths)
        results, waiting, sent = self._send(session, tickets_dir, wait=wait)
        if not wait:
            return results + self._left_queued(session, waiting, sent)
        for ticket_id, task_id, resend in waiting:
            answer = self.answers.wait(
                task_id, resend=resend, timeout_s=timeout_s,
                said=partial(_note, self.stderr, session.batch_id, ticket_id),
            )  # fmt: skip
            result = _result_of(ticket_id, answer, session.services)
            session.show(result)
            results.append(result)
        return results

    def _send(
        self, session: BatchSession, tickets_dir: Path, *, wait: bool
    ) -> tuple[list[TicketResult], list[Waiting], set[str]]:
        """One task per ticket to run: what was settled here, what waits, what was sent."""
        services, batch_id = session.services, session.batch_id
        distributed = self.loaded.config.distributed
        enqueued = Enqueued(self.store)
        results: list[TicketResult] = []
        waiting: list[Waiting] = []
        sent: set[str] = set()
        refused = duplicate_ids(queue_ids(session.paths))
        for path in session.paths:
            ticket_id = settled(path, services, refused)
            if isinstance(ticket_id, TicketResult):
                session.show(ticket_id)
                results.append(ticket_id)
                continue
            task_id = str(uuid.uuid4())
            earlier = enqueued.mark(ticket_id, task_id, keep_s=distributed.visibility_timeout_s)
            ticket_file, ticket_dir = task_ticket(
                open_state(services.storage.root), path, tickets_dir, batch_id, ticket_id,
                from_sources=bool(self.loaded.config.sources),
            )  # fmt: skip
            send = partial(
                self.answers.send,
                TASK_NAME,
                [ticket_id, ticket_file, ticket_dir, batch_id],
                earlier or task_id,
                queue_name(distributed.namespace),
            )
            if earlier is None:
                try:
                    send()
                except Exception:
                    enqueued.done(ticket_id, task_id)  # not queued: the next batch queues it
                    raise
                sent.add(task_id)
            waiting.append((ticket_id, earlier or task_id, send))
            if not wait:
                how = "queued" if earlier is None else "already queued"
                line = TicketResult(ticket_id, how, None, f"task {earlier or task_id}", 0.0,
                                    False, at=timestamp(services.clock()))  # fmt: skip
                session.show(line)
        return results, waiting, sent

    def _left_queued(
        self, session: BatchSession, waiting: list[Waiting], sent: set[str]
    ) -> list[TicketResult]:
        """``--no-wait``: lost messages sent again, one line, and the record's queued."""
        # Nobody waits for these: a task another batch queued whose message the broker
        # lost would be "already queued" until its mark expires (the visibility timeout).
        others = {task: (ticket, resend) for ticket, task, resend in waiting if task not in sent}
        for task_id in self.answers.confirm_lost(list(others)):
            ticket_id, resend = others[task_id]
            resend()
            _note(self.stderr, session.batch_id, ticket_id, lost_note(task_id, self.answers.policy))
        session.out.write(
            f"{timestamp(session.services.clock())} batch {session.batch_id}: "
            f"{len(waiting)} ticket(s) queued on {self.url.masked}\n"
            if not session.as_json
            else json.dumps({"queued": [t for t, _, _ in waiting], "batch": session.batch_id})
            + "\n"
        )
        return [
            TicketResult(t, "queued", None, f"task {task}", 0.0, False) for t, task, _ in waiting
        ]
