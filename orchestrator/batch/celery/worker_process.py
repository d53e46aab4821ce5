"""The Celery worker process itself: started with the fleet's app, and told how to pass a
stop on to its pool."""

from __future__ import annotations

import os
import signal
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


def serve(app: Any, argv: list[str]) -> None:
    """Run the worker (``argv`` as Celery's ``worker`` command takes it) until it stops."""
    from celery.signals import worker_shutting_down  # type: ignore[import-untyped]

    worker_shutting_down.connect(forward_shutdown, weak=False)
    app.worker_main(argv)
