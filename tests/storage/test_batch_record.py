"""A batch's record (``batches/<id>/batch.json``): written atomically, read back as it was
written, refused for an id that would reach outside ``batches/``; a batch from before the
record existed is read from its workers' logs, or reported as having no record."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.batch.record import batch_record
from orchestrator.batch.results import TicketResult
from orchestrator.domain.errors import StateError
from orchestrator.storage.batch_budget import Spend
from orchestrator.storage.batch_record import (
    latest_batch_id,
    read_batch_record,
    write_batch_record,
)
from orchestrator.storage.layout import StateLayout

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
RESULTS = [
    TicketResult("A-1", "completed", "A-1-20261201T030000Z-0001", "", 1.5, True),
    TicketResult("B-2", "refused", None, "ticket error: bad", 0.0, False),
]


def test_a_record_reads_back_as_written_and_leaves_no_temp_file(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    record = batch_record(
        "20261201T030000Z-abcd", backend="local", started_at=T0, results=RESULTS,
        spend=Spend(2, 100, 20, 0.0006), ended_at=T0, interrupted=False,
    )  # fmt: skip
    write_batch_record(layout, record)
    assert read_batch_record(layout, "20261201T030000Z-abcd") == record
    assert sorted(p.name for p in layout.batch_dir(record.batch_id).iterdir()) == ["batch.json"]
    raw = json.loads(layout.batch_record_path(record.batch_id).read_text())
    assert [t["run_id"] for t in raw["tickets"]] == ["A-1-20261201T030000Z-0001", None]
    assert layout.batch_ids() == ["20261201T030000Z-abcd"]


@pytest.mark.parametrize("batch_id", ["..", "../x", "a/b", ".hidden", "", "a..b"])
def test_an_id_that_could_reach_outside_batches_is_refused(tmp_path: Path, batch_id: str) -> None:
    with pytest.raises(StateError, match="is not a batch id"):
        read_batch_record(StateLayout(tmp_path), batch_id)
    with pytest.raises(StateError, match="is not a batch id"):
        write_batch_record(
            StateLayout(tmp_path), batch_record(batch_id, backend="local", started_at=T0)
        )
    assert not (tmp_path / "batches").exists()


def test_an_older_jobs_batch_is_read_from_its_workers_logs(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    batch_id = "20261130T030000Z-0ld0"
    # What an older ``--jobs 2`` batch left: its workers' logs, one JSON line per ticket
    # each looked at (the one that ran it, and the one that found it locked), no record.
    ran, skipped = RESULTS[0], TicketResult("A-1", "skipped", None, "locked by pid 9", 0.0, False)
    layout.batch_worker_log(batch_id, 1).parent.mkdir(parents=True)
    layout.batch_worker_log(batch_id, 1).write_text(
        "some stage chatter\n" + json.dumps(asdict(skipped)) + "\n"
    )
    layout.batch_worker_log(batch_id, 2).write_text(json.dumps(asdict(ran)) + "\n{not json\n")
    record = read_batch_record(layout, batch_id)
    assert record is not None
    assert [(t.ticket, t.status, t.run_id) for t in record.tickets] == [
        ("A-1", "completed", "A-1-20261201T030000Z-0001")
    ]
    assert record.spend is None and record.ended_at is None  # not recorded then


def test_an_older_batch_with_nothing_to_read_has_no_record(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    layout.batch_budget_path("20261130T030000Z-0ld1").parent.mkdir(parents=True)
    layout.batch_budget_path("20261130T030000Z-0ld1").write_text('{"calls": 1}')
    assert read_batch_record(layout, "20261130T030000Z-0ld1") is None


def test_a_damaged_record_is_a_state_error_naming_it(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    path = layout.batch_record_path("20261201T030000Z-abcd")
    path.parent.mkdir(parents=True)
    path.write_text('{"batch_id": 3}')
    with pytest.raises(StateError, match=f"{path}: not a valid batch record"):
        read_batch_record(layout, "20261201T030000Z-abcd")


def test_the_latest_batch_is_the_one_that_started_last_not_the_last_id(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    assert latest_batch_id(layout) is None  # no batch has run here
    # A user-chosen id sorts after the automatic ones but started first.
    write_batch_record(layout, batch_record("zz-nightly", backend="local", started_at=T0))
    later = T0.replace(hour=5)
    write_batch_record(
        layout, batch_record("20261201T050000Z-a1b2", backend="local", started_at=later)
    )
    assert latest_batch_id(layout) == "20261201T050000Z-a1b2"
    # A batch from before records is dated by its directory; a damaged record is passed over.
    old = layout.batch_dir("20261130T030000Z-0ld0")
    old.mkdir()
    os.utime(old, (later.timestamp() + 60, later.timestamp() + 60))
    assert latest_batch_id(layout) == "20261130T030000Z-0ld0"
    damaged = layout.batch_dir("zzz-damaged")
    damaged.mkdir()
    layout.batch_record_path("zzz-damaged").write_text("{not json")
    assert latest_batch_id(layout) == "20261130T030000Z-0ld0"
