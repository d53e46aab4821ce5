"""Handing an answered or resumed run to the fleet (``approve`` and ``resume`` with a
broker configured): a worker carries the rest of the ticket out in its own environment,
under the fleet's lease, instead of this shell."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.services import Services
from orchestrator.domain.broker_url import BROKER_URL_ENV
from orchestrator.domain.config import Config, LoadedConfig
from orchestrator.domain.errors import EXIT_COMPLETED
from orchestrator.domain.runs import RunRecord


def on_a_fleet(config: Config, environ: Mapping[str, str]) -> bool:
    """Whether a fleet of workers is configured (a broker URL in the config or the
    environment): an answered run is then handed to it, not carried out here."""
    return config.distributed.broker_url is not None or bool(environ.get(BROKER_URL_ENV))


def hand_to_fleet(
    loaded: LoadedConfig,
    services: Services,
    record: RunRecord,
    environ: Mapping[str, str],
    out: TextIO,
) -> int:
    """Queue the run's ticket to the fleet (``batch.celery.requeue``): a worker carries the
    answer out in its own environment. Redis out of reach loses nothing: the answer is
    recorded, and the next batch hands it to a worker; the line says so."""
    from orchestrator.cli.extras import require_distributed

    require_distributed("handing the run to the fleet")
    from orchestrator.batch.celery.requeue import requeue
    from orchestrator.storage import open_state
    from orchestrator.storage.redis import CoordinationUnavailable

    try:
        queued = requeue(
            loaded,
            open_state(services.storage.root),
            record.ticket_id,
            Path(record.ticket_snapshot),
            environ,
            services.clock(),
        )
    except CoordinationUnavailable as exc:
        out.write(
            f"not handed to the fleet now ({exc}); the next `orchestrator batch --backend "
            f"celery` hands it to a worker\n"
        )
        return EXIT_COMPLETED
    how = "already queued as" if queued.already else "queued to the fleet as"
    out.write(
        f"{how} task {queued.task_id}: a worker carries it out; its environment decides "
        "DRY_RUN and the tools\n"
    )
    return EXIT_COMPLETED
