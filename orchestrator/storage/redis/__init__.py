"""The stores of a fleet of workers sharing one state dir, beside the file stores: what
must be atomic across machines lives in Redis, the rest stays files in the state dir.

    client.CoordinationStore   one connection pool; the client's errors become ours
    coordination.TicketLeases  the per-ticket claim as a lease, with a fencing token
    fence.Fence                what a state write asks first (a no-op locally)
    fenced_stores.Fenced*      run, verdict, approval and charge stores that ask it
    ledger_lock.RedisLock      serialises ledger appends (flock is unreliable on NFS)
    fleet_ledger.FleetLedger   the ledger with its appends under that lock, fenced
    fleet_budget.FleetBudget   one atomic check-and-charge for the whole fleet
    fleet_stores.FleetStorage  every store of a claimed ticket's run, fenced: Services.storage

The Celery executor that runs tickets on these stores is ``orchestrator.batch.celery``.
These modules import only the domain, redaction and the other stores.

The redis client is imported inside ``client`` only, and only when a store is opened:
the local mode (``run``, ``batch``) never loads it. ``fence`` and ``errors`` import
nothing from it, so local code may hold a no-op fence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.storage._face import lazy_getattr

# The face: outside code imports from ``orchestrator.storage.redis`` only. Each name is
# imported when first asked for, so holding a no-op fence loads no Redis client.
_FROM: dict[str, str] = {
    "CoordinationStore": "client",
    "Claim": "coordination",
    "TicketLeases": "coordination",
    "claim": "coordination",
    "CoordinationUnavailable": "errors",
    "FencedOut": "errors",
    "TicketClaimed": "errors",
    "NO_FENCE": "fence",
    "Fence": "fence",
    "FleetBatchBudget": "fleet_budget",
    "FleetLedger": "fleet_ledger",
    "FleetStorage": "fleet_stores",
    "HeldClaim": "fleet_stores",
}
__all__ = [
    "NO_FENCE",
    "Claim",
    "CoordinationStore",
    "CoordinationUnavailable",
    "Fence",
    "FencedOut",
    "FleetBatchBudget",
    "FleetLedger",
    "FleetStorage",
    "HeldClaim",
    "TicketClaimed",
    "TicketLeases",
    "claim",
]


__getattr__ = lazy_getattr(__name__, _FROM)


if TYPE_CHECKING:
    from orchestrator.storage.redis.client import CoordinationStore
    from orchestrator.storage.redis.coordination import Claim, TicketLeases, claim
    from orchestrator.storage.redis.errors import CoordinationUnavailable, FencedOut, TicketClaimed
    from orchestrator.storage.redis.fence import NO_FENCE, Fence
    from orchestrator.storage.redis.fleet_budget import FleetBatchBudget
    from orchestrator.storage.redis.fleet_ledger import FleetLedger
    from orchestrator.storage.redis.fleet_stores import FleetStorage, HeldClaim
