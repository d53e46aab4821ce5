"""``PostgresStorage``: the state dir as a working copy of the database's record, opened
once per process (``storage.open``), its ticket lock a lease in the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.errors import TicketLocked
from orchestrator.storage import FileStorage, close_storages, open_state, open_storage
from orchestrator.storage.open import open_database


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


_PUBLISH_THEN_DIE = """
import os, signal, sys
from pathlib import Path
from orchestrator.storage import open_storage
from orchestrator.storage._atomic import atomic_write

root, url, path = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
data = sys.stdin.buffer.read()
storage = open_storage(root, url, lease_s=60)
published = storage.mirror.publish_relative

def publish_then_die(*args, **kwargs):
    published(*args, **kwargs)  # committed in the database...
    os.kill(os.getpid(), signal.SIGKILL)  # ...and killed before the local rename

storage.mirror.publish_relative = publish_then_die
with storage.locks.ticket("T-1"):
    atomic_write(path, data)
"""


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_killed_between_the_commit_and_the_rename_the_record_comes_back_from_the_database(
    pg_url: str, tmp_path: Path
) -> None:
    """kill -9 at the write this backend adds: the database has the record and this
    machine's copy does not. Taking the ticket's lease brings it down (its hydrate), and
    the killed write's temp file is swept as any other's."""
    import signal
    import subprocess
    import sys

    from conftest import subprocess_env
    from support.notify_fixtures import run_record

    root = tmp_path / "state"
    made = run_record()
    data = made.model_dump_json(indent=2).encode()
    record = root / "runs" / f"{made.run_id}.json"
    child = subprocess.run(
        [sys.executable, "-c", _PUBLISH_THEN_DIE, str(root), pg_url, str(record)],
        input=data, capture_output=True, env=subprocess_env(), timeout=50,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert not record.exists()
    left = [p.name for p in record.parent.iterdir()]
    assert len(left) == 1 and left[0].endswith(".tmp"), left
    try:
        storage = open_database(root, pg_url, lease_s=60)
        assert storage.hydrate(ticket_id="T-1") == 1
        assert record.read_bytes() == data
        assert [p.name for p in storage.sweep_stale_temps()] == left
    finally:
        close_storages()


def test_a_connection_cut_while_the_schema_migrates_is_unavailable_then_opens(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker opening its storage as the server restarts (its connection cut mid-way
    through the migration) is told PostgreSQL is unavailable, which the worker retries
    later, not a state error that spends the ticket; the next open works."""
    import psycopg

    from orchestrator.storage.postgres.connect import PostgresUnavailable
    from orchestrator.storage.postgres.migrate import migrate

    cuts: list[int] = []

    def cut_then_migrate(conn: psycopg.Connection[object]) -> list[int]:
        if not cuts:
            pid = conn.info.backend_pid
            with psycopg.connect(pg_url, autocommit=True) as admin:
                row = admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()
            cuts.append(pid)
            assert row == (True,)
        return migrate(conn)

    monkeypatch.setattr("orchestrator.storage.postgres.storage.migrate", cut_then_migrate)
    try:
        with pytest.raises(PostgresUnavailable, match="schema migration"):
            open_storage(tmp_path / "one", pg_url, lease_s=60)
        assert open_state(tmp_path / "one").__class__.__name__ == "FileStorage"  # not kept
        opened = open_storage(tmp_path / "one", pg_url, lease_s=60)
        assert opened.__class__.__name__ == "PostgresStorage"
        assert len(cuts) == 1
    finally:
        close_storages()
