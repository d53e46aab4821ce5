"""The Celery worker process itself: started with the fleet's app, and told how to pass a
stop on to its pool."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any


def pool_processes(pid: int) -> list[int]:
    """The worker's direct children: its pool processes (the stages are theirs)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def forward_shutdown(**_: object) -> None:
    """The worker itself was told to stop (``kill PID``, not its whole group): tell its
    pool processes too, so their tickets stop through the runner and are requeued now,
    rather than the worker waiting for them to end."""
    for child in pool_processes(os.getpid()):
        with suppress(ProcessLookupError):
            os.kill(child, signal.SIGTERM)


def worker_options(concurrency: int, queues: str | None, hostname: str) -> dict[str, Any]:
    """What Celery's ``worker`` command hands ``app.Worker`` for ``--pool prefork
    --concurrency N --hostname H --loglevel INFO --without-gossip --without-mingle
    [--queues Q,...]`` (pure; ``tests/batch/celery/test_worker_process.py`` holds it to
    what the command itself passes). No chatter between workers: they share nothing but
    Redis and the state dir. The values the command reads from the app's configuration
    are left for the worker to read there, as it does with any it is not given."""
    from celery.concurrency import get_implementation  # type: ignore[import-untyped]

    return {
        "hostname": hostname, "pool": get_implementation("prefork"), "pool_cls": None,
        "concurrency": concurrency, "loglevel": logging.INFO,
        "queues": queues.split(",") if queues else None,
        "without_gossip": True, "without_mingle": True, "without_heartbeat": False,
        "optimization": "default", "no_color": False, "quiet": False,
    }  # fmt: skip


def serve(app: Any, options: Mapping[str, Any]) -> None:
    """Run the worker (``options`` from ``worker_options``) until it stops, as Celery's
    ``worker`` command runs it, without loading that command line: ``worker_main``
    imports Celery's whole CLI (its click app, the amqp shell and its REPL), ~0.3 s of
    CPU at every start of a worker for nothing it uses."""
    from celery.exceptions import SecurityError  # type: ignore[import-untyped]
    from celery.platforms import maybe_drop_privileges  # type: ignore[import-untyped]
    from celery.signals import worker_shutting_down  # type: ignore[import-untyped]

    worker_shutting_down.connect(forward_shutdown, weak=False)
    try:
        maybe_drop_privileges(uid=None, gid=None)
        app.Worker(**options).start()
    except SecurityError as exc:  # what the command says of it, on stderr
        sys.stderr.write(f"{exc.args[0]}\n")
