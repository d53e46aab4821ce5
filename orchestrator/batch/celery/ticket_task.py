"""One ticket on a fleet worker: claim it, run it through the local batch's own driver
with the shared state dir's stores fenced by the claim, release it, report its outcome.

``run_claimed`` is the plain function (what a test can call without Celery);
``register`` binds it to the Celery task ``orchestrator.run_ticket``, which turns what it
cannot finish now into Celery's own answers:

* the ticket is claimed by another live worker: ``retry`` once its lease could have run
  out (never run twice, never waited for in a pool slot);
* an infrastructure back-off: the decision and its charge are persisted, then
  ``retry(countdown=…)`` instead of a sleeping worker; the retried task resumes the run,
  and the driver waits out only what is still owed;
* SIGTERM: the stage is stopped through the runner and the run saved (the CLI's own
  path), then the message is rejected back to the queue for the next worker to resume;
* Redis does not answer (restarting): ``retry`` a few seconds later; a write the run
  could not fence was not made, and the retried task resumes before it;
* fenced out (another worker took the ticket over while this one was paused): nothing
  is written, and the task ends without a result, since the ticket is the other's;
* the message names a ticket file its batch did not queue, or a batch nobody recorded
  (``storage.fleet_queue``, issue 40): refused before anything runs, one line in the
  worker's log, and rejected without requeueing.

A redelivered task (its worker was lost) finds the run and resumes it, as the local
batch resumes an unfinished run: completed stages are not re-run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from orchestrator.app.budgeted_calls import budgeted_factory
from orchestrator.app.services import build_services
from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.batch.queue import WORKER_ENVIRONMENT, run_one
from orchestrator.batch.results import TicketResult
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import Interrupted
from orchestrator.execution.reporter import Handoffs, QuietReporter, Reporter
from orchestrator.recovery.gateway import GatewayFactory
from orchestrator.storage.fleet_queue import NotQueued, check_ids
from orchestrator.storage.open import open_configured
from orchestrator.storage.postgres import PostgresUnavailable
from orchestrator.storage.redis import (
    CoordinationStore,
    CoordinationUnavailable,
    FencedOut,
    TicketClaimed,
    fleet_batch_budget,
)

TASK_NAME = "orchestrator.run_ticket"
# How soon a ticket whose coordination store did not answer is tried again.
UNAVAILABLE_RETRY_S = 5.0


class BackOff(Exception):
    """The run owes an infrastructure back-off: retry the task after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"back-off of {seconds:.1f}s")
        self.seconds = seconds


def _back_off(seconds: float) -> None:
    """``Services.sleep`` on a worker: the wait becomes a retry, not a blocked slot."""
    raise BackOff(seconds)


@dataclass(frozen=True)
class WorkerContext:
    """What every task of one worker shares: its config, state dir and environment."""

    config_file: Path
    state_dir_override: str | None
    environ: Mapping[str, str]
    out: TextIO
    gateway_factory: GatewayFactory | None = None  # tests script the model
    # Handed in by the worker command: the hand-off's text, what it says beside a ticket.
    handoffs: Handoffs = field(kw_only=True)
    reporter: Reporter = field(kw_only=True, default_factory=QuietReporter)


def run_claimed(
    context: WorkerContext,
    store: CoordinationStore,
    ticket_id: str,
    name: str,
    where: str,
    batch_id: str,
) -> TicketResult:
    """Claim ``ticket_id`` and run its file (``where``/``name``) to the end (or until it
    must stop): raises ``NotQueued`` (the batch queued no such file: nothing is run),
    ``TicketClaimed``, ``BackOff``, ``FencedOut`` or ``Interrupted`` for the task to
    answer; any other outcome is the ticket's result, as the local batch reports it.
    The claim and the budget are the storage's: with files, a Redis lease fencing each
    write and the fleet's budget in Redis; with PostgreSQL, the database's own."""
    loaded = load_config(context.config_file)
    config = loaded.config
    base = build_services(
        loaded, context.state_dir_override, context.environ,
        reporter=context.reporter, handoffs=context.handoffs,
    )  # fmt: skip
    storage = open_configured(loaded, base.storage.root, context.environ)  # the services'
    check_ids(batch_id, ticket_id)
    ticket_file = storage.queued_ticket(batch_id, ticket_id, name, where)
    with storage.fleet_ticket(store, ticket_id, config.distributed.lease_s) as held:
        budget = fleet_batch_budget(storage, store, batch_id, config.batch, config.prices)
        services = replace(
            base,
            storage=held,
            reporter=QuietReporter(),
            gateway_factory=budgeted_factory(
                context.gateway_factory or base.gateway_factory, budget
            ),
            sleep=_back_off,
        )
        # The worker's environment decides DRY_RUN (and the tools), not the batch's.
        result = run_one(ticket_file, services, decides=WORKER_ENVIRONMENT)
    if result.status == "skipped":  # its lease is another live worker's: try again later
        raise TicketClaimed(ticket_id, result.detail)
    return result


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    # Once: a second TERM (the group's and the worker's forwarded one) must not cut
    # short the runner stopping the stage.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM unwinds the ticket as it does the CLI's: the runner stops the stage
    (TERM, grace, KILL) and the driver saves the run. Only the main thread of a process
    can take a signal: in a prefork pool process, that is the one running the task."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def refusal(task_id: str, ticket_id: str, batch_id: str, exc: NotQueued) -> str:
    """The worker's log line for a message it refused (ids shown as repr: they are the
    message's, not ours)."""
    return (
        f"refused task {task_id!r} (ticket {ticket_id!r}, batch {batch_id!r}): {exc.reason}; "
        "nothing was run"
    )


def _forget(enqueued: Enqueued, ticket_id: str, task_id: str) -> None:
    """The ticket is no longer queued; if Redis cannot hear it now, the entry expires."""
    with suppress(CoordinationUnavailable):
        enqueued.done(ticket_id, task_id)


def register(app: Any, context: WorkerContext, store: CoordinationStore) -> Any:
    """Bind ``orchestrator.run_ticket`` to ``app`` for this worker."""
    from celery.exceptions import Ignore, Reject  # type: ignore[import-untyped]

    enqueued = Enqueued(store)
    lease_s = load_config(context.config_file).config.distributed.lease_s

    @app.task(name=TASK_NAME, bind=True, max_retries=None, acks_late=True)  # type: ignore[untyped-decorator]
    def run_ticket(
        self: Any, ticket_id: str, ticket_file: str, queue_dir: str, batch_id: str
    ) -> dict[str, Any]:
        try:
            with stopped_by_sigterm():
                result = run_claimed(context, store, ticket_id, ticket_file, queue_dir, batch_id)
        except NotQueued as exc:
            # Signed by the fleet, yet naming what no batch queued: refused, said in the
            # worker's log, and dropped (never requeued, so it does not come back).
            context.out.write(f"{refusal(self.request.id, ticket_id, batch_id, exc)}\n")
            context.out.flush()
            raise Reject(exc.reason, requeue=False) from None
        except TicketClaimed as exc:
            context.out.write(f"{exc}; retrying in {lease_s:.0f}s\n")
            raise self.retry(countdown=lease_s) from None
        except BackOff as owed:
            raise self.retry(countdown=max(owed.seconds, 0.0)) from None
        except (CoordinationUnavailable, PostgresUnavailable) as exc:
            # Redis or PostgreSQL is down (restarting?): whatever the run had not written
            # waits with it; the retried task resumes the run from what was.
            context.out.write(
                f"ticket {ticket_id}: {exc}; retrying in {UNAVAILABLE_RETRY_S:.0f}s\n"
            )
            raise self.retry(countdown=UNAVAILABLE_RETRY_S) from None
        except FencedOut as exc:
            context.out.write(f"{exc}\n")
            raise Ignore() from None
        except Interrupted:
            context.out.write(f"ticket {ticket_id}: stopped; state saved, requeued\n")
            raise Reject("stopped by SIGTERM; the run is saved", requeue=True) from None
        except Exception:
            _forget(enqueued, ticket_id, self.request.id)
            raise
        _forget(enqueued, ticket_id, self.request.id)
        return asdict(result)

    return run_ticket
