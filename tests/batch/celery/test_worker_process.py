"""The worker is built as Celery's own ``worker`` command builds it: ``worker_options``
against what that command hands ``app.Worker`` for the same flags (Celery's CLI run for
real, its ``Worker`` replaced by a recorder), on an app with the fleet's settings."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery  # type: ignore[import-untyped]

from orchestrator.batch.celery.celery_app import celery_settings
from orchestrator.batch.celery.worker_process import worker_options

# What the worker would be started with from Celery's command line.
FLAGS = [
    "worker", "--pool", "prefork", "--hostname", "orchestrator-1@box", "--loglevel", "INFO",
    "--without-gossip", "--without-mingle",
]  # fmt: skip


def as_the_command_builds_it(argv: list[str]) -> tuple[Celery, dict[str, Any]]:
    app = Celery("fleet", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.update(celery_settings(namespace="fleet", visibility_timeout_s=3600))
    handed: dict[str, Any] = {}

    class Recorder:
        exitcode = 0

        def __init__(self, **options: Any) -> None:
            handed.update(options)

        def start(self) -> None:
            pass

    app.Worker = Recorder
    app.worker_main(argv)
    return app, handed


@pytest.mark.parametrize(
    ("concurrency", "queues"), [(1, None), (3, "fleet.tickets"), (2, "fleet.tickets,other")]
)
def test_the_worker_gets_what_celerys_worker_command_would_give_it(
    concurrency: int, queues: str | None
) -> None:
    argv = [*FLAGS, "--concurrency", str(concurrency)] + (["--queues", queues] if queues else [])
    app, handed = as_the_command_builds_it(argv)
    ours = worker_options(concurrency, queues, "orchestrator-1@box")
    assert ours.items() <= handed.items()
    # What we leave out, the worker reads from the app's configuration, or takes a default
    # that does the same as the command's value (None, False: the feature off).
    conf = app.conf
    from_conf = {
        "prefetch_multiplier": conf.worker_prefetch_multiplier,
        "statedb": conf.worker_state_db,
        "schedule_filename": conf.beat_schedule_filename,
    }
    for name, value in handed.items():
        if name in ours:
            continue
        assert value in (None, False) or value == from_conf.get(name), (name, value)
    assert from_conf["prefetch_multiplier"] == 1  # the fleet's, not Celery's default of 4
