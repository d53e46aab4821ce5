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

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TextIO

from orchestrator.batch.local import LocalBackend
from orchestrator.batch.results import exit_code
from orchestrator.batch.session import close_batch, listed, open_batch
from orchestrator.cli.console import terminal_services
from orchestrator.cli.preflight import gate
from orchestrator.cli.published import check_destinations, publish_batch
from orchestrator.domain import errors
from orchestrator.domain.config import load_config
from orchestrator.recovery.gateway import GatewayFactory


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
    """``gateway_factory``: the model (tests script it); ``clock``, ``sleep``: the batch's
    time (a test's: a back-off, an outage's age); ``published``: ``--report``,
    ``--metrics``; ``preflight``: check the machine once (a ``--jobs N`` worker does not)."""
    if jobs < 1:
        raise errors.UsageError("batch: --jobs must be at least 1")
    check_destinations((("batch --report", published[0]), ("batch --metrics", published[1])))
    loaded, err = load_config(config_file), stderr or sys.stderr
    paths = listed(loaded, tickets_dir)
    if preflight:
        gate(loaded, state_dir_override, environ, err)
    services = terminal_services(loaded, state_dir_override, out, environ)
    services = replace(services, clock=clock or services.clock, sleep=sleep or services.sleep)
    session = open_batch(loaded, services, paths, backend="local", out=out, environ=environ,
                         as_json=as_json or worker, worker=worker, jobs=jobs)  # fmt: skip
    local = LocalBackend(config_file, tickets_dir, jobs, worker, environ, gateway_factory)
    results, interrupted = local.run(session)
    if worker:
        return errors.EXIT_INTERRUPTED if interrupted else exit_code(results)
    done = partial(
        publish_batch, session.storage.root, config_file, session.batch_id, *published, err
    )
    return close_batch(session, results, session.budget(), done, interrupted=interrupted)
