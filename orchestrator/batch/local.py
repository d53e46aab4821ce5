"""The local backend of a batch: its open session's queue run in this process
(``--jobs 1``, or as one of a batch's ``--jobs N`` workers), or over N worker processes
that each claim tickets from it. One model budget for the whole batch; SIGTERM/SIGINT
stop it with its state saved (the next batch resumes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.app.budgeted_calls import budgeted_factory
from orchestrator.app.refused_key import RefusedKeyLatch
from orchestrator.app.services import Services
from orchestrator.batch.queue import run_queue
from orchestrator.batch.results import TicketResult, timestamp
from orchestrator.batch.session import BatchSession
from orchestrator.batch.workers import Stopped, run_workers
from orchestrator.domain.errors import Interrupted
from orchestrator.execution.reporter import QuietReporter
from orchestrator.recovery.gateway import GatewayFactory


@dataclass(frozen=True)
class LocalBackend:
    """``worker``: this process is one of its batch's ``--jobs N`` workers (its parent
    records the batch, catches up on notices and closes it)."""

    config_file: Path
    tickets_dir: Path
    jobs: int
    worker: bool
    environ: Mapping[str, str]
    gateway_factory: GatewayFactory | None = None

    def run(self, session: BatchSession) -> tuple[list[TicketResult], bool]:
        """Every ticket's result, and whether the batch was interrupted (then, unless
        a worker, its last line says the state is saved)."""
        services = self._services(session)
        if not self.worker:  # notices an earlier batch did not get out (its parent's job)
            services.notifier.catch_up()
        session.start(record=not self.worker)  # a worker's batch records it
        reported: list[TicketResult] = []

        def emit(result: TicketResult) -> None:
            session.show(result)
            reported.append(result)
            if not self.worker:  # after each ticket: a batch killed halfway says what it touched
                session.record(reported)

        results: list[TicketResult] = []
        interrupted = False
        try:
            if self.jobs == 1 or self.worker:
                run_queue(session.paths, services, emit, results)
            else:
                results = run_workers(
                    self.jobs, self.config_file, services, self.tickets_dir, session.batch_id,
                    session.storage.layout, self.environ,
                )  # fmt: skip
                for result in results:
                    emit(result)
        except Stopped as stopped:
            interrupted, results = True, stopped.results
            for result in results:
                emit(result)
        except Interrupted:
            interrupted = True
        if interrupted and not self.worker and not any(r.status == "interrupted" for r in results):
            results.append(TicketResult(
                "-", "interrupted", None, "state saved; the next batch resumes", 0.0, True,
                at=timestamp(services.clock()),
            ))  # fmt: skip
        return results, interrupted

    def _services(self, session: BatchSession) -> Services:
        """The session's services with the batch's budget and the batch's own voice."""

        def say(line: str) -> None:
            print(f"batch: {line}", file=session.out, flush=True)

        services = session.services
        return replace(
            services,
            reporter=QuietReporter(),
            notifier=services.notifier.saying(say),
            gateway_factory=budgeted_factory(
                RefusedKeyLatch(
                    self.gateway_factory or services.gateway_factory,
                    session.loaded.config.model.api_key_env,
                    say=say,
                ),
                session.budget(),
            ),
        )
