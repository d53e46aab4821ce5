"""The Celery executor, beside the local queue and the worker-process executor: a batch's
tickets as queued tasks that a fleet of workers on several machines take, each driving its
ticket with the fleet's stores (``orchestrator.storage.redis``).

    celery_app.celery_app      the Celery app the fleet shares (late acks, requeue on loss)
    enqueued.Enqueued          one queued task per unfinished ticket, however many batches
    task_results.TaskResults   the batch's wait for its tasks' results, through outages
    ticket_task.run_claimed    one ticket on a worker: claim, drive with fleet stores, release
    ticket_task.register       ``orchestrator.run_ticket``: back-off and claims as retries
    worker_process.serve       the Celery worker, passing a stop on to its pool

Celery (and kombu, billiard) is imported inside functions only: ``--help``, ``run`` and
the local ``batch`` never load it.
"""
