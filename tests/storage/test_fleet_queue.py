"""Which ticket file a fleet task may name (issue 40, ``storage/fleet_queue.py``): only a
file its batch listed before queueing it, or the batch's own copy of the ticket — never a
path the message makes up."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pytest

from orchestrator.batch.record import batch_record
from orchestrator.storage.batch_record import write_batch_record
from orchestrator.storage.fleet_queue import NotQueued, note_queued, queued_ticket
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.ticket_queue import copy_queued_ticket

from conftest import write_ticket

BATCH = "20261207T031500Z-ab12"


def recorded_batch(state: Path, batch_id: str = BATCH) -> None:
    write_batch_record(
        StateLayout(state), batch_record(batch_id, backend="celery", started_at=datetime.now(UTC))
    )


def refusal(state: Path, *args: str) -> str:
    with pytest.raises(NotQueued) as refused:
        queued_ticket(state, *args)
    return refused.value.reason


def test_a_file_the_batch_listed_is_run_and_nothing_else_on_the_shared_disk(tmp_path: Path) -> None:
    state, tickets = tmp_path / "state", tmp_path / "tickets"
    listed = write_ticket(tickets, "T-1")
    unlisted = write_ticket(tickets, "T-2")
    recorded_batch(state)
    note_queued(state, BATCH, [listed])
    where = str(tickets.resolve())
    assert queued_ticket(state, BATCH, "T-1", "T-1.md", where) == Path(where) / "T-1.md"
    assert refusal(state, BATCH, "T-2", unlisted.name, where) == (
        f"{tickets.resolve() / 'T-2.md'} is not a ticket batch {BATCH} queued"
    )
    assert "is not a ticket batch" in refusal(state, BATCH, "T-1", "passwd", "/etc")
    assert "is not a path inside" in refusal(state, BATCH, "T-1", "../tickets/T-1.md", where)
    # A symlink beside the listed file that leads to it is still not what was listed
    # unless it resolves to it; one that leads elsewhere is refused.
    os.symlink("/etc/passwd", tickets / "evil.md")
    assert "is not a ticket batch" in refusal(state, BATCH, "T-1", "evil.md", where)
    # A batch run again under its id keeps what it listed before.
    note_queued(state, BATCH, [unlisted])
    assert queued_ticket(state, BATCH, "T-1", "T-1.md", where).name == "T-1.md"
    assert queued_ticket(state, BATCH, "T-2", "T-2.md", where).name == "T-2.md"


def test_a_batch_nobody_recorded_or_an_id_that_is_not_one_is_refused(tmp_path: Path) -> None:
    state, tickets = tmp_path / "state", tmp_path / "tickets"
    listed = write_ticket(tickets, "T-1")
    note_queued(state, BATCH, [listed])  # a list, but no record of the batch
    where = str(tickets.resolve())
    assert (
        refusal(state, BATCH, "T-1", "T-1.md", where) == f"no batch {BATCH} is recorded in {state}"
    )
    assert refusal(state, "../..", "T-1", "T-1.md", where) == "'../..' is not a batch id"
    assert refusal(state, BATCH, "../T-1", "T-1.md", where) == "'../T-1' is not a ticket id"


def test_the_batchs_copy_is_run_only_from_its_own_place(tmp_path: Path) -> None:
    state = tmp_path / "state"
    copy = copy_queued_ticket(state, BATCH, "T-1", {PurePosixPath("T-1.md"): b"ticket"})
    assert queued_ticket(state, BATCH, "T-1", "T-1.md", copy.as_posix()) == state / copy / "T-1.md"
    climbing = f"{copy.as_posix()}/../../../../../etc"
    assert "is not batch" in refusal(state, BATCH, "T-1", "passwd", climbing)
    assert "is not batch" in refusal(state, BATCH, "T-2", "T-1.md", copy.as_posix())
    assert "is not a file name" in refusal(state, BATCH, "T-1", "../T-1/T-1.md", copy.as_posix())
    assert "has no copy" in refusal(state, BATCH, "T-1", "T-9.md", copy.as_posix())
    os.symlink("/etc/passwd", state / copy / "out.md")
    assert "leads out of" in refusal(state, BATCH, "T-1", "out.md", copy.as_posix())
