"""A batch over N worker processes: each is ``orchestrator batch --worker`` over the same
queue, started (and, on SIGTERM, stopped) through the executor, claiming tickets by flock
exactly as an in-process batch does. Each prints one JSON line per ticket it looked at
into its log; the batch merges them."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from orchestrator.app.services import Services
from orchestrator.batch.results import TicketResult, merge, worker_results
from orchestrator.domain.errors import Interrupted
from orchestrator.execution.process import ProcessOutcome, ProcessRequest
from orchestrator.storage.batch_budget import BATCH_ENV
from orchestrator.storage.layout import StateLayout


def run_workers(
    jobs: int,
    config_file: Path,
    services: Services,
    tickets_dir: Path,
    batch_id: str,
    layout: StateLayout,
    environ: Mapping[str, str],
) -> list[TicketResult]:
    """N worker processes, started (and, on SIGTERM, stopped) through the runner."""
    argv = (
        sys.executable, "-P", "-m", "orchestrator", "--config", str(config_file),
        "--state-dir", str(services.storage.runs.state_dir), "batch", "--worker",
        "--tickets", str(tickets_dir.resolve()),
    )  # fmt: skip
    env = {**environ, BATCH_ENV: batch_id}
    # A worker given TERM stops its stage (TERM, grace, KILL) and saves: give it that long.
    grace = max(s.kill_after_s for s in services.loaded.config.stages) + 10.0
    cancel = threading.Event()
    logs = [layout.batch_worker_log(batch_id, k + 1) for k in range(jobs)]

    def work(log: Path) -> ProcessOutcome:
        # Uncapped: a worker's log is how its results reach us (one line per ticket), and
        # a worker is this program, not a stage; its stages' own logs are capped.
        return services.executor.run(
            ProcessRequest(
                argv, cwd=Path.cwd(), env=env, log_path=log,
                timeout_s=7 * 24 * 3600, kill_after_s=grace, cancel=cancel, max_log_bytes=None,
            )
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(work, log) for log in logs]
        try:
            # In steps: a SIGTERM that lands just before a blocking wait begins would
            # otherwise be handled only once every worker has ended (stoppable_sleep's case).
            while wait(futures, timeout=1.0).not_done:
                pass
        except Interrupted:
            cancel.set()
            wait(futures)
            merged = _collected(logs)
            raise Stopped(merged) from None
    return _collected(logs)


def _collected(logs: list[Path]) -> list[TicketResult]:
    return merge(
        [r for log in logs if log.exists() for r in worker_results(log.read_text(errors="replace"))]
    )


class Stopped(Interrupted):
    """The batch was interrupted; ``results`` is what the workers had reported by then."""

    def __init__(self, results: list[TicketResult]) -> None:
        super().__init__(15)
        self.results = results
