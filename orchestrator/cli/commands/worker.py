"""``orchestrator worker [--concurrency N] [--queues Q,...]``: a Celery worker running the
fleet's tickets (``orchestrator.run_ticket``) from the shared state dir.

The pool is Celery's prefork: N pool processes, each running one ticket at a time in its
main thread. They are copies of this program forked by Celery, as the local batch's
workers are copies of it; every stage, check, git and agent process is still started by
``execution/runner.py`` alone, which is what the runner rule guards (the runner owns
what runs untrusted commands, and stops them). A pool process's main thread is also the
one that can take SIGTERM: the ticket it runs then stops its stage through the runner,
saves the run and goes back to the queue (threads could not be interrupted so).

SIGTERM to the worker's process group (systemd, a container stop): every running ticket
is stopped that way and requeued, and the worker exits once they have been; a ticket of
a worker lost without a word (SIGKILL, a dead machine) is redelivered by Redis after the
visibility timeout, and its run resumed where it stopped.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.fleet_key import fleet_key_files, require_fleet_key
from orchestrator.batch.celery.celery_app import celery_app
from orchestrator.batch.celery.ticket_task import WorkerContext, register
from orchestrator.batch.celery.worker_process import serve, worker_options
from orchestrator.cli.console import reporter_for
from orchestrator.domain import errors
from orchestrator.domain.broker_url import broker_url_from
from orchestrator.domain.config import load_config
from orchestrator.recovery.gateway import GatewayFactory
from orchestrator.reports.handoff import MARKDOWN
from orchestrator.storage.redis import CoordinationStore


def worker(
    config_file: Path,
    state_dir_override: str | None,
    *,
    concurrency: int,
    queues: str | None,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    gateway_factory: GatewayFactory | None = None,
) -> int:
    """``gateway_factory`` replaces the configured model (tests script it)."""
    if concurrency < 1:
        raise errors.UsageError("worker: --concurrency must be at least 1")
    loaded = load_config(config_file)
    distributed = loaded.config.distributed
    url = broker_url_from(distributed.broker_url, environ, loaded.path)
    fleet = require_fleet_key(fleet_key_files(loaded))  # before anything is asked of Redis
    store = CoordinationStore(url, namespace=distributed.namespace)
    store.ping()  # unreachable: one line naming it (masked), exit 75
    # A task that starts, retries or ends as Redis restarts keeps retrying its state's
    # write and its retry's message for as long as a waiting batch bears an outage:
    # without it, the task fails with the connection error and its batch reports a worker
    # error for a ticket that never went wrong.
    app = celery_app(
        url, namespace=distributed.namespace, fleet=fleet,
        visibility_timeout_s=distributed.visibility_timeout_s, patience_s=distributed.outage_wait_s,
    )  # fmt: skip
    context = WorkerContext(config_file, state_dir_override, dict(environ), out, gateway_factory,
                            handoffs=MARKDOWN, reporter=reporter_for(out, environ))  # fmt: skip
    register(app, context, store)
    hostname = f"orchestrator-{os.getpid()}@{socket.gethostname()}"
    out.write(f"worker {hostname}: tickets from {url.masked} ({distributed.namespace})\n")
    out.flush()
    serve(app, worker_options(concurrency, queues, hostname))
    return errors.EXIT_COMPLETED
