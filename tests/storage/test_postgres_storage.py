"""``PostgresStorage``: the state dir as a working copy of the database's record, opened
once per process (``storage.open``), its ticket lock a lease in the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.errors import TicketLocked
from orchestrator.storage import FileStorage, close_storages, open_state, open_storage


def test_a_state_dir_without_a_database_is_its_files(tmp_path: Path) -> None:
    assert isinstance(open_storage(tmp_path, None, lease_s=60), FileStorage)
    assert isinstance(open_state(tmp_path), FileStorage)


def test_one_storage_per_state_dir_and_its_ticket_lock_holds_across_machines(
    pg_url: str, tmp_path: Path
) -> None:
    try:
        one = open_storage(tmp_path / "one", pg_url, lease_s=60)
        assert open_storage(tmp_path / "one", pg_url, lease_s=60) is one
        assert open_state(tmp_path / "one") is one  # what code given only the path gets
        two = open_storage(tmp_path / "two", pg_url, lease_s=60)  # another machine
        with one.locks.ticket("T-1"):
            with pytest.raises(TicketLocked) as caught:
                with two.locks.ticket("T-1"):
                    pass
            said = str(caught.value)
            assert said.startswith("skipped: T-1 is locked by ") and ":" in said, said
            with pytest.raises(TicketLocked), one.locks.ticket("T-1"):
                pass  # held here already (another thread of this process, say)
        with two.locks.ticket("T-1"):  # let go: the other machine takes it at once
            pass
    finally:
        close_storages()
    assert isinstance(open_state(tmp_path / "one"), FileStorage)  # closed: files again
