"""Every store a fleet worker's ticket run writes, assembled from one claim: the shared
state dir's file stores, each write fenced by the claim, and the ledger under the fleet's
Redis lock. This is the ``Services.storage`` the ticket driver is handed in the distributed mode,
in place of the state dir's own ``FileStorage``. Approvals are kept as given here and
signed and verified by the run (``app/stores.approvals_of``) with the shared state dir's
approval key, the same key on every machine and for ``orchestrator approve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from orchestrator.domain.errors import StateError
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import Claim
from orchestrator.storage.redis.fenced_stores import (
    FencedApprovals,
    FencedBudgets,
    FencedDecisions,
    FencedRunStore,
)
from orchestrator.storage.redis.fleet_ledger import FleetLedger
from orchestrator.storage.redis.ledger_lock import ledger_lock

if TYPE_CHECKING:
    from orchestrator.storage.protocols import (
        Approvals,
        Budgets,
        DecisionLedger,
        Decisions,
        Locks,
        Storage,
    )
    from orchestrator.storage.runs import RunStore


class HeldClaim:
    """The ticket lock a fleet worker hands the driver: its claim, won before the run
    (the flock would not exclude another machine on a network filesystem)."""

    def __init__(self, ticket_id: str) -> None:
        self.ticket_id = ticket_id

    @contextmanager
    def ticket(self, ticket_id: str) -> Iterator[None]:
        if ticket_id != self.ticket_id:
            raise StateError(
                f"state error: this worker holds ticket {self.ticket_id}, but its file now "
                f"says {ticket_id}; the ticket file changed after it was queued"
            )
        yield


class FleetStorage:
    """The claimed ticket's stores on the shared state dir (``Services.storage`` on a
    fleet worker): each write fenced by the claim, the ledger under the fleet's lock,
    the claim itself as the ticket's lock."""

    def __init__(
        self, storage: Storage, claim: Claim, store: CoordinationStore, ticket_id: str
    ) -> None:
        self._storage, self._claim, self._store = storage, claim, store
        fence = claim.fence
        self.root = storage.root
        self.runs: RunStore = FencedRunStore(storage.root, fence)
        self.decisions: Decisions = FencedDecisions(storage.decisions, fence)
        self.approvals: Approvals = FencedApprovals(storage.approvals, fence)
        self.budgets: Budgets = FencedBudgets(storage.budgets, fence)
        self.locks: Locks = HeldClaim(ticket_id)

    def ledger(self, key: bytes | None = None) -> DecisionLedger:
        return FleetLedger(self._storage.ledger(key), ledger_lock(self._store), self._claim.fence)
