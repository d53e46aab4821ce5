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
