"""The batch's one id maker (``batch/session.py``): the local batch, the Celery batch and a
requeued ticket's batch of one all name a batch the same way, and a ``--jobs N`` worker
takes its parent's id from the environment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from orchestrator.batch.session import batch_id_from, new_batch_id
from orchestrator.storage.batch_budget import BATCH_ENV

NOW = datetime(2026, 12, 7, 13, 5, 9, tzinfo=UTC)


def test_a_batch_id_is_its_start_in_utc_then_four_hex_digits() -> None:
    local = NOW.astimezone(timezone(timedelta(hours=-5)))
    made = {new_batch_id(local) for _ in range(20)}
    assert all(re.fullmatch(r"20261207T130509Z-[0-9a-f]{4}", made_id) for made_id in made)
    assert len(made) > 1  # the suffix is random: two batches in one second do not collide


def test_a_worker_takes_its_parents_batch_id_and_a_batch_without_one_makes_its_own() -> None:
    assert batch_id_from({BATCH_ENV: "20261207T000000Z-beef"}, NOW) == "20261207T000000Z-beef"
    assert batch_id_from({}, NOW).startswith("20261207T130509Z-")
    assert batch_id_from({BATCH_ENV: ""}, NOW).startswith("20261207T130509Z-")
