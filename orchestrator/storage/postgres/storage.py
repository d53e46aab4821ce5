"""Every store of one state dir whose record is a PostgreSQL database: what
``Services.storage`` is when ``[storage] url`` (or ``$ORCHESTRATOR_STORAGE_URL``) names
one.

The state dir stays: it is this machine's working copy. Stages run in its run
directories, and every reader (``show``, ``verdicts``, ``report``, …) reads its files as
with the files backend. What changes is where the record is:

* every file the stores write under it is published to the database before it lands
  (``_atomic.published_under`` → ``StateMirror.publish``), in one transaction that checks
  the ticket's lease when this process holds it: a worker that lost its ticket is refused
  by the database, and its file is not written either;
* the budgets, the batch budget and the ledger are the database's own tables (each charge
  and each append one transaction), never files;
* the ticket lock is the ticket's lease in the database (``PostgresLeases``, renewed by a
  heartbeat), so a process on another machine is excluded too; taking it brings the
  ticket's runs down from the database (``hydrate``), so a run started elsewhere resumes
  here;
* ``hydrate()`` brings down what other machines wrote since the last time (a reader calls
  it before it reads).

One per state dir per process (``storage.open.open_storage``): the publisher is
registered for the process, shared by a batch's worker threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.domain.errors import StateError, TicketLocked
from orchestrator.storage._atomic import published_under
from orchestrator.storage.files import ApprovalFiles, FileStorage, VerdictFiles
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.postgres.budgets import PostgresBatchBudget, PostgresBudgets
from orchestrator.storage.postgres.claim import claim
from orchestrator.storage.postgres.connect import PostgresUnavailable
from orchestrator.storage.postgres.leases import LeaseToken, PostgresLeases
from orchestrator.storage.postgres.ledger import PostgresLedger
from orchestrator.storage.postgres.migrate import migrate
from orchestrator.storage.postgres.mirror import StateMirror, route
from orchestrator.storage.postgres.session import ReusedConnections, transaction
from orchestrator.storage.redis.errors import TicketClaimed

if TYPE_CHECKING:
    from orchestrator.domain.config import BatchConfig, PriceConfig
    from orchestrator.storage.redis.client import CoordinationStore
    from orchestrator.storage.runs import RunStore

# A write that finds the database gone (restarting, its connection cut) is sent again,
# after a pause doubling from the first to the second, for as long as the ticket's lease
# lasts: a publish is idempotent (the same bytes again), and the fence still decides.
OUTAGE_PAUSES_S = (0.1, 2.0)


def held_elsewhere(ticket_id: str, holder: str) -> TicketLocked:
    """TicketLocked (what every caller of a ticket lock answers), naming the lease's
    holder (``host:pid:…``) and that it lasts until its holder lets go or ``lease_s``
    passes, as a flock's holder is named by its pid."""
    locked = TicketLocked(ticket_id, None)
    locked.args = (
        f"skipped: {ticket_id} is locked by {holder} (its lease in the database, held "
        "until that process lets go of it or the lease runs out)",
    )
    return locked


class PostgresTicketLocks:
    """The ticket lock as a lease in the database: held by one process on any machine,
    renewed by a heartbeat while held, taken over by another only once it ran out. While
    it is held here, this process's writes of the ticket's files are fenced by it."""

    def __init__(self, storage: PostgresStorage) -> None:
        self._storage = storage
        self._held: dict[str, LeaseToken] = {}
        self._guard = threading.Lock()

    def fence_of(self, ticket_id: str | None) -> LeaseToken | None:
        return None if ticket_id is None else self._held.get(ticket_id)

    @contextmanager
    def ticket(self, ticket_id: str) -> Iterator[None]:
        """Hold the ticket's lease; raises TicketLocked (naming its holder) instead of
        waiting, as the flock does. Held here already (another thread): TicketLocked too."""
        with self._guard:
            if ticket_id in self._held:
                raise TicketLocked(ticket_id, None)
            self._held[ticket_id] = LeaseToken(ticket_id, -1)  # reserved while claiming
        try:
            with ExitStack() as stack:
                try:
                    lease = stack.enter_context(
                        claim(self._storage.leases, ticket_id, ttl_s=self._storage.lease_s)
                    )
                except TicketClaimed as exc:
                    raise held_elsewhere(ticket_id, exc.holder) from exc
                self._held[ticket_id] = lease.fence
                # What another machine wrote of this ticket, before anything reads it.
                self._storage.mirror.hydrate(ticket_id=ticket_id)
                yield
        finally:
            with self._guard:
                self._held.pop(ticket_id, None)


class PostgresStorage:
    """The state dir as this machine's working copy of a PostgreSQL database's record."""

    shared_batch_budget = True  # by a fleet: the database's, which every worker charges

    def __init__(self, root: Path, url: str, *, lease_s: float) -> None:
        self.root = root
        self.lease_s = lease_s
        self.layout = StateLayout(root)
        self._files = FileStorage(root)
        self._connect = ReusedConnections(url)
        self.mirror = StateMirror(self._connect, root)
        self.leases = PostgresLeases(self._connect)
        self.locks = PostgresTicketLocks(self)
        self._attached = ExitStack()

    def attach(self) -> PostgresStorage:
        """Bring the schema up to date and publish this state dir's writes from now on."""
        self.root.mkdir(parents=True, exist_ok=True)
        # A connection lost mid-migration (the server restarting as a worker opens its
        # storage) is PostgresUnavailable like any other write's: the caller tries again
        # later; the migration's own transaction rolled back whatever it had done.
        with transaction(
            self._connect,
            says="state error: migrating the PostgreSQL schema",
            error=StateError,
            unavailable="the PostgreSQL schema migration",
            implicit=True,
        ) as conn:
            migrate(conn)
        self._attached.enter_context(
            published_under(self.root, self._publish, lambda path: self.forget([path]))
        )
        return self

    def close(self) -> None:
        self._attached.close()
        self._connect.close()

    def _publish(self, path: Path, data: bytes) -> bool:
        relative = self.mirror.relative_of(path)  # resolved by the caller (_atomic)
        found = route(relative)  # which ticket's lease fences it (None: not kept, or no ticket's)
        fence = None if found is None else self.locks.fence_of(found.ticket_id)
        # Issue 30: a restart of PostgreSQL (or a dropped connection) while a stage ran
        # failed the task and lost the stage's end, which another worker then ran again.
        deadline = time.monotonic() + self.lease_s
        pause = OUTAGE_PAUSES_S[0]
        while True:
            try:
                return self.mirror.publish_relative(relative, data, fence=fence)
            except PostgresUnavailable:
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, OUTAGE_PAUSES_S[1])

    def forget(self, removed: Iterable[Path]) -> None:
        """Files removed from the state dir (prune's clones and logs) leave the database
        too, so no machine's next ``hydrate`` brings them back."""
        self.mirror.forget(removed)

    def hydrate(
        self, *, ticket_id: str | None = None, queued: tuple[str, str] | None = None
    ) -> int:
        """Bring down what the database has that this copy lacks (all of it, one
        ticket's runs, or one queued ticket's copy: ``StateMirror.hydrate``); how many
        files."""
        return self.mirror.hydrate(ticket_id=ticket_id, queued=queued)

    @property
    def runs(self) -> RunStore:
        return self._files.runs

    @property
    def decisions(self) -> VerdictFiles:
        return self._files.decisions

    @property
    def approvals(self) -> ApprovalFiles:
        return self._files.approvals

    @cached_property
    def budgets(self) -> PostgresBudgets:
        return PostgresBudgets(self._connect)

    def ledger(self, key: bytes | None = None) -> PostgresLedger:
        return PostgresLedger(self._connect, key=key)

    def batch_budget(
        self, batch_id: str, caps: BatchConfig, prices: dict[str, PriceConfig]
    ) -> PostgresBatchBudget:
        return PostgresBatchBudget(self._connect, batch_id, caps, prices)

    def queued_ticket(self, batch_id: str, ticket_id: str, name: str, where: str) -> Path:
        """The ticket file ``batch_id`` queued, the batch's copy brought down first (that
        only: the ticket's runs come down with its lease)."""
        if not Path(where).is_absolute():
            self.hydrate(queued=(batch_id, ticket_id))
        return self._files.queued_ticket(batch_id, ticket_id, name, where)

    @contextmanager
    def fleet_ticket(
        self, coordination: CoordinationStore, ticket_id: str, lease_s: float
    ) -> Iterator[PostgresStorage]:
        """Itself: the ticket's lock is its lease in the database (taken by the driver,
        every write of the run fenced by it); Redis is only Celery's broker."""
        yield self

    def sweep_stale_temps(self) -> list[Path]:
        return self._files.sweep_stale_temps()
