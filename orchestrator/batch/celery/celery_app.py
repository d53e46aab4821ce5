"""The Celery application a fleet's workers and its batch share: Redis as broker and
result store, configured for "each ticket exactly once" under crashes and redelivery.

* ``task_acks_late``: a task is acknowledged when it ends, not when it starts, so a
  worker that dies mid-ticket leaves the message unacknowledged;
* ``task_reject_on_worker_lost``: a pool process killed mid-task requeues it rather
  than failing it;
* ``visibility_timeout``: how long an unacknowledged message stays with its worker before
  Redis gives it to another. It must outlast the longest ticket, or a ticket still
  running is handed out twice (the ticket's lease then refuses the second, but its time is
  lost);
* ``worker_prefetch_multiplier = 1``: a worker holds one ticket per slot, never a queue of
  them that a crash would strand until the visibility timeout;
* JSON only: a message is data, never a pickle to execute;
* signed (issue 40): every task message is signed with the fleet's key by Celery's own
  ``auth`` serializer, and a worker accepts nothing else: an unsigned message, or one
  signed by a key whose certificate is not the fleet's, is refused by the worker's
  consumer before any task code runs (logged, and acknowledged or rejected, never
  requeued). Results stay JSON: they are read by the batch, never executed;
* every key is under the namespace, so several projects can share one Redis.

Celery is imported only when an app is built: the local mode never loads it.
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass
from typing import Any

from orchestrator.app.fleet_key import FleetKey, require_fleet_key
from orchestrator.domain.broker_url import BrokerUrl

# A 30-minute coding-agent run, its checks and a retry fit well inside six hours.
DEFAULT_VISIBILITY_TIMEOUT_S = 6 * 3600.0
# How often a worker looks for messages whose worker was lost past the visibility timeout.
DEFAULT_RESTORE_INTERVAL_S = 10.0


def queue_name(namespace: str) -> str:
    return f"{namespace}.tickets"


def key_prefix(namespace: str) -> str:
    """What kombu and the result backend put before each of their keys."""
    return f"{namespace}:celery:"


# kombu's Redis transport keeps a queue as one list per priority step (the name alone for
# priority 0, then the name, "\x06\x16" and the step) and every delivered message not
# yet acknowledged in one hash. Pinned by a test against a live worker.
_PRIORITY_STEPS = (0, 3, 6, 9)
_PRIORITY_SEPARATOR = "\x06\x16"


@dataclass(frozen=True)
class BrokerKeys:
    """Where the broker keeps the fleet's messages: the queue's lists, and the hash of
    messages delivered to a worker and not acknowledged."""

    queues: tuple[str, ...]
    unacked: str


def broker_keys(namespace: str) -> BrokerKeys:
    prefix, queue = key_prefix(namespace), queue_name(namespace)
    return BrokerKeys(
        queues=tuple(
            f"{prefix}{queue}{_PRIORITY_SEPARATOR}{step}" if step else f"{prefix}{queue}"
            for step in _PRIORITY_STEPS
        ),
        unacked=f"{prefix}unacked",
    )


def celery_settings(
    *,
    namespace: str,
    visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
    restore_interval_s: float = DEFAULT_RESTORE_INTERVAL_S,
    patience_s: float | None = None,
) -> dict[str, Any]:
    """The app's configuration (pure: what a test can read without starting anything).
    The URL itself is not in it, so printing it shows no password: ``celery_app`` hands
    the URL to Celery directly.

    ``patience_s``: about how long Celery retries a Redis that does not answer before it
    gives up: publishing a task (a worker's retry of a ticket that could not reach Redis
    is one), the result store's reconnections (both about once a second), and its reads
    and writes of a task's state (a random pause of up to a second between tries). None:
    Celery's defaults, which give a worker's state writes no retry at all and a publish
    about a second: a task that starts, retries or ends as Redis restarts fails with the
    connection error, and its batch reports a worker error for a ticket that never went
    wrong."""
    if visibility_timeout_s <= 0 or restore_interval_s <= 0:
        raise ValueError("the visibility timeout and the restore interval must be positive")
    transport = {
        "visibility_timeout": visibility_timeout_s,
        "unacked_restore_interval": restore_interval_s,
        # Kombu scans only every tenth sweep by default: a lost worker's ticket would wait
        # ten intervals past its visibility timeout. One scan of an index per interval.
        "unacked_restore_throttle": 1,
        "global_keyprefix": key_prefix(namespace),
    }
    results: dict[str, Any] = {"global_keyprefix": key_prefix(namespace)}
    retries: dict[str, Any] = {}
    if patience_s is not None:
        # Pauses of 0, 0.5, then 1 s: n tries take about n - 1.5 s.
        steady = {
            "max_retries": max(1, math.ceil(patience_s + 1.5)),
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 1.0,
        }
        results["retry_policy"] = steady
        retries = {
            "task_publish_retry": True,
            "task_publish_retry_policy": steady,
            # Full jitter up to a second: half a second a try on average.
            "result_backend_always_retry": True,
            "result_backend_max_retries": math.ceil(2 * patience_s) + 4,
            "result_backend_base_sleep_between_retries_ms": 100,
            "result_backend_max_sleep_between_retries_ms": 1000,
        }
    return {
        **retries,
        "broker_transport_options": transport,
        "result_backend_transport_options": results,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": queue_name(namespace),
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_track_started": True,
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
    }


# What a signed message's body is, under the signature; results are plain JSON.
SIGNED = "auth"
# The signed serializer's content type: the name is registered only by ``setup_security``,
# after it disabled the others, so the type is what it is allowed by.
SIGNED_CONTENT_TYPE = "application/data"
UNSIGNED_RESULTS = "json"


def signing_settings(fleet: FleetKey) -> dict[str, Any]:
    """Celery's message signing with the fleet's key (pure): tasks are sent signed and
    only signed ones are accepted; the certificate is the one signer trusted (a store of
    one file, its path taken literally)."""
    return {
        "task_serializer": SIGNED,
        "accept_content": [SIGNED],
        "result_serializer": UNSIGNED_RESULTS,
        "result_accept_content": [UNSIGNED_RESULTS],
        "event_serializer": UNSIGNED_RESULTS,
        "security_key": str(fleet.key),
        "security_certificate": str(fleet.certificate),
        "security_cert_store": glob.escape(str(fleet.certificate)),
        "security_digest": "sha256",
    }


def celery_app(
    url: BrokerUrl,
    *,
    namespace: str,
    fleet: FleetKey,
    visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
    restore_interval_s: float = DEFAULT_RESTORE_INTERVAL_S,
    patience_s: float | None = None,
) -> Any:
    """A Celery app on the fleet's Redis whose task messages are signed with ``fleet``'s
    key (a ConfigError names a missing or unusable file). Celery has no type hints:
    typed ``Any``."""
    from celery import Celery  # type: ignore[import-untyped]

    require_fleet_key(fleet)
    app = Celery(namespace, broker=url.reveal(), backend=url.reveal())
    app.conf.update(
        celery_settings(
            namespace=namespace,
            visibility_timeout_s=visibility_timeout_s,
            restore_interval_s=restore_interval_s,
            patience_s=patience_s,
        )
    )
    app.conf.update(signing_settings(fleet))
    # Registers the signing serializer and disables every other one but the results'
    # JSON in this process (kombu's registry is global: a pickle is never loaded).
    app.setup_security(allowed_serializers=[SIGNED_CONTENT_TYPE, UNSIGNED_RESULTS])
    return app
