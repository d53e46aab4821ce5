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

import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TextIO

from orchestrator.batch.celery.backend import CeleryBackend
from orchestrator.batch.session import close_batch, close_queued, listed, open_batch
from orchestrator.cli.console import terminal_services
from orchestrator.cli.preflight import gate
from orchestrator.cli.published import check_destinations, publish_batch
from orchestrator.domain.config import load_config
from orchestrator.execution.reporter import QuietReporter


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
    loaded, err = load_config(config_file), stderr or sys.stderr
    # With [[sources]], the queue is what they yield, once the broker has answered.
    paths = listed(loaded, tickets_dir)
    if preflight:
        gate(loaded, state_dir_override, environ, err, backend="celery")
    fleet = CeleryBackend.connect(loaded, environ, err)
    services = terminal_services(loaded, state_dir_override, out, environ)
    services = replace(services, reporter=QuietReporter())
    session = open_batch(
        loaded, services, paths, backend="celery", out=out, as_json=as_json, environ=environ
    )
    session.start()
    results = fleet.run(session, tickets_dir, wait=wait, timeout_s=wait_timeout_s)
    done = partial(
        publish_batch, session.storage.root, config_file, session.batch_id, *published, err
    )
    if not wait:
        return close_queued(session, results, done)
    return close_batch(session, results, fleet.budget(session), done)
