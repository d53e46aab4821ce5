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
nothing from it, so local code may hold a no-op fence. Outside code imports from here
only, each name when first asked for (``storage._face``): the block below is the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.storage.redis.client import CoordinationStore as CoordinationStore
    from orchestrator.storage.redis.coordination import Claim as Claim
    from orchestrator.storage.redis.coordination import TicketLeases as TicketLeases
    from orchestrator.storage.redis.coordination import claim as claim
    from orchestrator.storage.redis.errors import CoordinationUnavailable as CoordinationUnavailable
    from orchestrator.storage.redis.errors import FencedOut as FencedOut
    from orchestrator.storage.redis.errors import TicketClaimed as TicketClaimed
    from orchestrator.storage.redis.fence import NO_FENCE as NO_FENCE
    from orchestrator.storage.redis.fence import Fence as Fence
    from orchestrator.storage.redis.fleet_budget import FleetBatchBudget as FleetBatchBudget
    from orchestrator.storage.redis.fleet_budget import fleet_batch_budget as fleet_batch_budget
    from orchestrator.storage.redis.fleet_ledger import FleetLedger as FleetLedger
    from orchestrator.storage.redis.fleet_stores import FleetStorage as FleetStorage
    from orchestrator.storage.redis.fleet_stores import HeldClaim as HeldClaim
else:
    from orchestrator.storage._face import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
