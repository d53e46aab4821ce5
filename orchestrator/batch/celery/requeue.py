"""Handing one ticket to the fleet: what a ``--backend celery`` batch does for each ticket
it queues, and what ``approve`` and ``resume`` do once a person has answered, so that the
rest of the ticket runs on a worker (its environment decides DRY_RUN and the tools), not
in the approver's shell.

A task names the ticket's file and its directory. With the files backend every machine
mounts the same state dir and tickets, so those are absolute paths (``located``). With
the PostgreSQL backend the workers share no disk with this machine: the ticket and the
files it refers to are copied under the state dir's ``batches/<batch-id>/tickets/``,
which publishes them to the database, and the task names that directory relative to the
state dir (``carried``); a worker brings its copy of the state dir up to date and reads
it there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.app.fleet_key import fleet_key_files, require_fleet_key
from orchestrator.batch.celery.celery_app import celery_app, queue_name
from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.batch.celery.ticket_task import TASK_NAME
from orchestrator.batch.record import batch_record
from orchestrator.batch.session import new_batch_id
from orchestrator.domain.broker_url import broker_url_from
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage import FileStorage
from orchestrator.storage.batch_record import write_batch_record
from orchestrator.storage.fleet_queue import note_queued
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.redis import CoordinationStore
from orchestrator.storage.ticket_queue import copy_queued_ticket

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig
    from orchestrator.storage import StateStorage


def located(path: Path, tickets_dir: Path, *, from_sources: bool) -> tuple[str, str]:
    """The task's ticket file and the directory it is in, which every worker shares (the
    tickets directory, or with ``[[sources]]`` the state dir's intake or a directory
    source): the worker opens ``Path(directory) / file``."""
    if from_sources:
        resolved = path.resolve()
        return resolved.name, str(resolved.parent)
    return os.path.relpath(path, tickets_dir), str(tickets_dir.resolve())


def carried(path: Path, root: Path, batch_id: str, ticket_id: str) -> tuple[str, str]:
    """The task's ticket file and its directory relative to the state dir: a copy of the
    ticket and the files it refers to, written there (and so published to the database,
    from which each worker's copy of the state dir is brought up to date)."""
    ticket = load_ticket(path)
    source = ticket.path.parent
    files = {
        PurePosixPath(f.relative_to(source).as_posix()): f.read_bytes()
        for f in (ticket.path, *ticket.extra_files())
    }
    return ticket.path.name, copy_queued_ticket(root, batch_id, ticket_id, files).as_posix()


def task_ticket(
    storage: StateStorage, path: Path, tickets_dir: Path, batch_id: str, ticket_id: str, *,
    from_sources: bool,
) -> tuple[str, str]:  # fmt: skip
    """Where the task tells a worker the ticket is (see the module docstring)."""
    if isinstance(storage, FileStorage):
        return located(path, tickets_dir, from_sources=from_sources)
    return carried(path, storage.root, batch_id, ticket_id)


@dataclass(frozen=True)
class Requeued:
    task_id: str
    batch_id: str
    already: bool  # a task of the ticket was queued and not finished: that one carries it


def requeue(
    loaded: LoadedConfig,
    storage: StateStorage,
    ticket_id: str,
    snapshot: Path,
    environ: Mapping[str, str],
    now: datetime,
) -> Requeued:
    """Queue ``ticket_id`` (its run's ticket snapshot) to the fleet as a batch of one,
    unless a task of it is queued and not finished already. Raises CoordinationUnavailable
    (naming the broker, masked) when Redis cannot be reached: nothing is queued then."""
    distributed = loaded.config.distributed
    url = broker_url_from(distributed.broker_url, environ, loaded.path)
    fleet = require_fleet_key(fleet_key_files(loaded))  # before anything is marked or sent
    store = CoordinationStore(url, namespace=distributed.namespace)
    store.ping()
    batch_id = new_batch_id(now)
    ticket_file, ticket_dir = task_ticket(
        storage, snapshot, snapshot.parent, batch_id, ticket_id, from_sources=True
    )
    enqueued = Enqueued(store)
    task_id = str(uuid.uuid4())
    earlier = enqueued.mark(ticket_id, task_id, keep_s=distributed.visibility_timeout_s)
    if earlier is not None:
        return Requeued(earlier, batch_id, already=True)
    try:
        # The batch of one, recorded with what it queues: a worker runs only that (issue 40).
        write_batch_record(
            StateLayout(storage.root), batch_record(batch_id, backend="celery", started_at=now)
        )
        note_queued(storage.root, batch_id, [snapshot])
        app = celery_app(
            url, namespace=distributed.namespace, fleet=fleet,
            visibility_timeout_s=distributed.visibility_timeout_s,
        )  # fmt: skip
        app.send_task(
            TASK_NAME,
            args=[ticket_id, ticket_file, ticket_dir, batch_id],
            task_id=task_id,
            queue=queue_name(distributed.namespace),
        )
    except Exception:
        enqueued.done(ticket_id, task_id)  # not queued: the mark would wedge the ticket
        raise
    return Requeued(task_id, batch_id, already=False)
