"""Run records and ticket leases in PostgreSQL: a record published through the state
mirror (as a PostgreSQL storage's run store publishes each save) is the file store's
bytes, which another machine brings down and reads; one lease holder at a time with a
token that only grows; every fenced write checked in the transaction that makes it, so a
paused worker cannot land a stale record. On a real server (``pg_url``); leases run out
on the database's clock, which the tests wait on by asking it, never by sleeping a
guessed time."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from orchestrator.domain.errors import StateError  # noqa: E402 - after the skip without psycopg
from orchestrator.domain.lifecycle import RunState  # noqa: E402
from orchestrator.domain.runs import RunRecord  # noqa: E402
from orchestrator.storage.postgres import (  # noqa: E402
    PostgresLeases,
    PostgresUnavailable,
    StateMirror,
    migrate,
)
from orchestrator.storage.redis import FencedOut  # noqa: E402
from orchestrator.storage.runs import RunStore  # noqa: E402

from support.run_records import publish_record, run_record  # noqa: E402

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)
DEADLINE_S = 15.0


@pytest.fixture
def db(pg_url: str) -> str:
    with psycopg.connect(pg_url) as conn:
        assert 4 in migrate(conn)
    return pg_url


def record(ticket_id: str, created: datetime, note: str = "", suffix: str = "") -> RunRecord:
    return run_record(ticket_id, created, title=f"Fix the thing {note} é ✓", suffix=suffix)


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds, or fail after DEADLINE_S naming ``what``."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def ask(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(sql, params).fetchone()
    return None if found is None else found[0]


def wait_expired(url: str, ticket_id: str) -> None:
    """Until the ticket's lease has run out on the database's clock."""
    until(
        lambda: ask(
            url,
            "SELECT clock_timestamp() > expires_at FROM ticket_leases WHERE ticket_id = %s",
            (ticket_id,),
        ),
        f"{ticket_id}'s lease to run out",
    )


def waiting_on(url: str, pid: int) -> int | None:
    """A backend blocked on a lock that ``pid`` holds, if there is one."""
    return ask(
        url,
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY (pg_blocking_pids(pid))",
        (pid,),
    )


def stored(url: str, run_id: str) -> str | None:
    return ask(url, "SELECT record FROM runs WHERE run_id = %s", (run_id,))


def text(record: RunRecord) -> str:
    return record.model_dump_json(indent=2)


# -- the records: what the file store keeps and answers, PostgreSQL does the same ---------


def test_records_round_trip_as_the_file_store_keeps_them(db: str, tmp_path: Path) -> None:
    files = RunStore(tmp_path / "here")
    files.runs_dir.mkdir(parents=True)
    older = record("T-1", AT, "older")
    newer = record("T-1", AT + timedelta(minutes=5, microseconds=250), "newer")
    tie_a = record("T-2", AT, "tie", suffix="0aaa")
    tie_b = record("T-2", AT, "tie", suffix="0bbb")
    other = record("T-10", AT + timedelta(hours=1), "a ticket whose id starts with T-1")
    moved_on = older.model_copy(update={"state": RunState.RUNNING, "updated_at": AT})
    for each in (newer, older, tie_b, tie_a, other, moved_on):
        files.save(each)
        publish_record(db, files.state_dir, each)

    there = tmp_path / "there"  # another machine, which brings every ticket's runs down
    for ticket in ("T-1", "T-2", "T-10", "T-3"):
        StateMirror(db, there).hydrate(ticket_id=ticket)
    for each in (moved_on, newer, tie_a, tie_b, other):
        # The exact bytes the file store wrote: no key reordered, nothing reformatted.
        assert stored(db, each.run_id) == files.record_path(each.run_id).read_text()
        assert RunStore(there).load(each.run_id).ticket_title == each.ticket_title
    for ticket in ("T-1", "T-2", "T-10", "T-3"):
        assert RunStore(there).latest_runs([ticket]) == files.latest_runs([ticket])
    assert files.latest_runs(["T-1", "T-2", "T-3"]).run_ids == {
        "T-1": newer.run_id,
        "T-2": tie_a.run_id,
    }


def test_what_the_file_store_refuses_is_refused(db: str, tmp_path: Path) -> None:
    with pytest.raises(StateError, match="not a run record of T-2"):
        publish_record(db, tmp_path, record("T-1", AT).model_copy(update={"ticket_id": "T-2"}))
    assert stored(db, record("T-1", AT).run_id) is None
    damaged = record("T-1", AT)
    publish_record(db, tmp_path, damaged)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE runs SET record = '{\"run_id\": 1}'")
    StateMirror(db, tmp_path / "there").hydrate(ticket_id="T-1")
    with pytest.raises(StateError, match=f"{damaged.run_id}.json: not a run record of T-1"):
        RunStore(tmp_path / "there").latest_for_ticket("T-1")


# -- leases: one holder at a time, a token that only grows --------------------------------


def test_one_holder_at_a_time_and_the_token_grows(db: str) -> None:
    leases = PostgresLeases(db)
    assert leases.acquire("T-1", "A", 30) == 1
    assert leases.acquire("T-1", "B", 30) is None
    assert leases.acquire("T-1", "A", 30) == 1  # its own win, asked again
    assert leases.acquire("T-2", "B", 30) == 1  # tokens are per ticket
    assert leases.renew("T-1", "A", 1, 30)
    assert not leases.release("T-1", "B", 1)
    assert leases.acquire("T-1", "B", 30) is None
    assert leases.release("T-1", "A", 1)
    assert not leases.renew("T-1", "A", 1, 30)  # released: not A's any more
    assert leases.acquire("T-1", "B", 30) == 2
    with psycopg.connect(db, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="only grows"):
            conn.execute("UPDATE ticket_leases SET token = 1 WHERE ticket_id = 'T-1'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="are kept"):
            conn.execute("DELETE FROM ticket_leases")


def test_workers_racing_for_a_new_ticket_get_one_lease(db: str) -> None:
    leases = PostgresLeases(db)
    start = threading.Barrier(8)
    won: dict[str, int | None] = {}

    def race(holder: str) -> None:
        start.wait(timeout=DEADLINE_S)
        won[holder] = leases.acquire("T-new", holder, 30)

    racers = [threading.Thread(target=race, args=(f"W{n}",)) for n in range(8)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=DEADLINE_S)
    assert sorted(won.values(), key=str) == [1] + [None] * 7, won


def test_an_unreachable_database_is_named_without_its_password(db: str, tmp_path: Path) -> None:
    password = db.split(":")[2].split("@")[0]
    wrong = db.replace(password, "not-the-password")
    with pytest.raises(PostgresUnavailable) as refused:
        publish_record(wrong, tmp_path, record("T-1", AT))
    assert "password authentication failed" in str(refused.value)
    assert "not-the-password" not in str(refused.value) and password not in str(refused.value)
    with pytest.raises(PostgresUnavailable):
        PostgresLeases(wrong).acquire("T-1", "A", 30)


def test_expiry_hands_the_ticket_over_with_the_next_token(db: str, tmp_path: Path) -> None:
    leases = PostgresLeases(db)
    assert leases.acquire("T-1", "A", 0.2) == 1
    wait_expired(db, "T-1")
    assert leases.acquire("T-1", "B", 30) == 2
    assert not leases.renew("T-1", "A", 1, 30)
    assert not leases.release("T-1", "A", 1)
    with pytest.raises(FencedOut) as refused:
        publish_record(db, tmp_path, record("T-1", AT), fence=("T-1", 1))
    assert str(refused.value) == (
        "fenced out: ticket T-1: this worker's fencing token is 1, but another worker took "
        "it over by B (current fencing token 2); nothing was written"
    )
    assert (refused.value.held, refused.value.current) == (1, 2)
    assert stored(db, record("T-1", AT).run_id) is None


def test_a_lease_that_ran_out_fences_its_holder_until_renewed(db: str, tmp_path: Path) -> None:
    leases = PostgresLeases(db)
    mine = record("T-1", AT)
    with pytest.raises(FencedOut, match="the database has no lease of it"):
        publish_record(db, tmp_path, mine, fence=("T-1", 1))
    assert leases.acquire("T-1", "A", 0.2) == 1
    wait_expired(db, "T-1")
    with pytest.raises(FencedOut, match="its lease ran out"):
        publish_record(db, tmp_path, mine, fence=("T-1", 1))
    assert leases.renew("T-1", "A", 1, 30)  # nobody took it meanwhile: still A's
    publish_record(db, tmp_path, mine, fence=("T-1", 1))
    assert stored(db, mine.run_id) == text(mine)


# -- the stale writer ----------------------------------------------------------------------


def _paused_worker(url: str, root: Path, created: datetime, outcome: Any) -> None:
    """Worker A: win the lease, stop itself (as a long GC or a frozen VM would stop it)
    just before its save, and report what the save did once continued."""
    token = PostgresLeases(url).acquire("T-1", "A", 0.5)
    outcome.send(token)  # a pipe, not a queue: a queue's feeder thread would stop too
    os.kill(os.getpid(), signal.SIGSTOP)
    try:
        publish_record(url, root, record("T-1", created, "A's"), fence=("T-1", token))
    except FencedOut as exc:
        outcome.send(f"refused: {exc}")
    else:
        outcome.send("written")


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.timeout(60)
def test_a_paused_worker_cannot_land_a_stale_write(db: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    outcome, sent = ctx.Pipe(duplex=False)
    worker_a = ctx.Process(target=_paused_worker, args=(db, tmp_path, AT, sent))
    worker_a.start()
    try:
        assert outcome.poll(DEADLINE_S)
        assert outcome.recv() == 1
        until(lambda: stopped(worker_a.pid or 0), "worker A to stop")
        wait_expired(db, "T-1")
        assert PostgresLeases(db).acquire("T-1", "B", 30) == 2
        b_record = record("T-1", AT, "B's")
        publish_record(db, tmp_path, b_record, fence=("T-1", 2))
    finally:
        os.kill(worker_a.pid or 0, signal.SIGCONT)
    assert outcome.poll(DEADLINE_S)
    assert outcome.recv() == (
        "refused: fenced out: ticket T-1: this worker's fencing token is 1, but another "
        "worker took it over by B (current fencing token 2); nothing was written"
    )
    worker_a.join(timeout=DEADLINE_S)
    assert worker_a.exitcode == 0
    assert stored(db, b_record.run_id) == text(b_record)


@pytest.mark.timeout(60)
def test_a_save_waiting_on_the_new_holders_lock_is_refused_after_it_commits(
    db: str, tmp_path: Path
) -> None:
    leases = PostgresLeases(db)
    assert leases.acquire("T-1", "A", 0.2) == 1
    wait_expired(db, "T-1")
    assert leases.acquire("T-1", "B", 30) == 2
    a_record, b_record = record("T-1", AT, "A's"), record("T-1", AT, "B's")
    a_result: list[BaseException | None] = []

    def a_saves() -> None:
        try:
            publish_record(db, tmp_path, a_record, fence=("T-1", 1))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            a_result.append(exc)
        else:
            a_result.append(None)

    a_thread = threading.Thread(target=a_saves)

    def while_b_holds_the_lock(conn: Any) -> None:
        a_thread.start()
        until(lambda: waiting_on(db, conn.info.backend_pid) is not None, "A to wait on B")

    publish_record(db, tmp_path, b_record, fence=("T-1", 2), before_write=while_b_holds_the_lock)
    a_thread.join(timeout=DEADLINE_S)
    assert len(a_result) == 1 and isinstance(a_result[0], FencedOut), a_result
    assert a_result[0].current == 2
    assert stored(db, b_record.run_id) == text(b_record)


@pytest.mark.timeout(60)
def test_a_takeover_waits_for_a_save_that_passed_its_check(db: str, tmp_path: Path) -> None:
    """Check and write are one: a lease that runs out between them cannot be taken over
    until the write has committed, so nothing older can land after the new token."""
    leases = PostgresLeases(db)
    assert leases.acquire("T-1", "A", 0.5) == 1
    a_record, b_record = record("T-1", AT, "A's"), record("T-1", AT, "B's")
    b_token: list[int | None] = []
    b_thread = threading.Thread(target=lambda: b_token.append(leases.acquire("T-1", "B", 30)))

    def a_pauses_between_check_and_write(conn: Any) -> None:
        wait_expired(db, "T-1")
        b_thread.start()
        until(lambda: waiting_on(db, conn.info.backend_pid) is not None, "B to wait on A")

    publish_record(
        db, tmp_path, a_record, fence=("T-1", 1), before_write=a_pauses_between_check_and_write
    )
    b_thread.join(timeout=DEADLINE_S)
    assert b_token == [2]
    with pytest.raises(FencedOut):
        publish_record(db, tmp_path, a_record, fence=("T-1", 1))
    publish_record(db, tmp_path, b_record, fence=("T-1", 2))
    assert stored(db, b_record.run_id) == text(b_record)


def test_a_connection_dropped_in_a_fenced_save_writes_nothing(db: str, tmp_path: Path) -> None:
    leases = PostgresLeases(db)
    assert leases.acquire("T-1", "A", 30) == 1
    first = record("T-1", AT, "first")
    publish_record(db, tmp_path, first, fence=("T-1", 1))
    second = first.model_copy(update={"state": RunState.RUNNING})

    def dropped(conn: Any) -> None:
        pid = conn.info.backend_pid
        assert waiting_on(db, pid) is None
        # Holding the lease row's lock: the server ends the backend, as a crash would.
        assert ask(db, "SELECT pg_terminate_backend(%s, 5000)", (pid,)) is True

    with pytest.raises(PostgresUnavailable, match="the PostgreSQL state mirror: "):
        publish_record(db, tmp_path, second, fence=("T-1", 1), before_write=dropped)
    assert stored(db, first.run_id) == text(first)
    # The lock went with the backend: the holder carries on, a newcomer is still refused.
    assert leases.acquire("T-1", "B", 30) is None
    publish_record(db, tmp_path, second, fence=("T-1", 1))
    assert stored(db, first.run_id) == text(second)


def test_the_runs_need_no_migration_but_their_tables_and_the_publish(
    pg_url: str, tmp_path: Path
) -> None:
    """Run records and their leases stand on 0004 (their tables), 0005 (the mirror's seq)
    and 0007 (the write's function) over the first two alone: the budgets' 0003 and the
    ledger history's 0006 may come later."""
    package = files("orchestrator.storage.postgres") / "migrations"
    for name in (
        "0001_schema_version.sql",
        "0002_ledger.sql",
        "0004_runs.sql",
        "0005_state_files.sql",
        "0007_publish.sql",
    ):
        (tmp_path / name).write_bytes((package / name).read_bytes())
    with psycopg.connect(pg_url) as conn:
        assert migrate(conn, directory=tmp_path) == [1, 2, 4, 5, 7]
    assert PostgresLeases(pg_url).acquire("T-1", "A", 30) == 1
    publish_record(pg_url, tmp_path / "state", record("T-1", AT), fence=("T-1", 1))
