"""Coordination for a fleet of workers sharing one state dir: what must be atomic across
machines lives in Redis, the rest stays files in the state dir.

    client.CoordinationStore   one connection pool; the client's errors become ours
    coordination.TicketLeases  the per-ticket claim as a lease, with a fencing token
    fence.Fence                what a state write asks first (a no-op locally)
    fenced_stores.Fenced*      run, verdict, approval and charge stores that ask it
    ledger_lock.RedisLock      serialises ledger appends (flock is unreliable on NFS)
    fleet_ledger.FleetLedger   the ledger with its appends under that lock, fenced
    fleet_budget.FleetBudget   one atomic check-and-charge for the whole fleet
    fleet_stores.FleetStorage  every store of a claimed ticket's run, fenced: Services.storage
    celery_app.celery_app      the Celery app the fleet shares (late acks, requeue on loss)
    enqueued.Enqueued          one queued task per unfinished ticket, however many batches
    ticket_task.run_claimed    one ticket on a worker: claim, drive with fleet stores, release
    ticket_task.register       ``orchestrator.run_ticket``: back-off and claims as retries
    worker_process.serve       the Celery worker, passing a stop on to its pool

The redis client is imported inside ``client`` only, and only when a store is opened:
the local mode (``run``, ``batch``) never loads it. ``fence`` and ``errors`` import
nothing from it, so local code may hold a no-op fence.
"""
