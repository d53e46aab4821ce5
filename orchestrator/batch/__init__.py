"""Batches of tickets: the queue run in this process, or over N worker processes; what
they report. The Celery executor (a queue of tasks that a fleet of workers takes) is
``batch.celery``."""
