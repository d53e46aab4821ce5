"""A batch as one use case: opened (its id, its state, its queue from the tickets
directory or the ``[[sources]]``) and closed (its summary, record, exit code and
published page), whichever backend ran its tickets in between."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime

from orchestrator.storage import BATCH_ENV


def new_batch_id(now: datetime) -> str:
    """A batch's id: its start in UTC, then four hex digits (two batches a second apart
    sort by time; two in the same second do not collide)."""
    return f"{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"


def batch_id_from(environ: Mapping[str, str], now: datetime) -> str:
    """A ``--jobs N`` worker's batch id is its parent's (``BATCH_ENV``); else a new one."""
    return environ.get(BATCH_ENV) or new_batch_id(now)
