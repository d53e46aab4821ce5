"""Budgets in PostgreSQL: the file store's values for the same charges, each charge one
transaction, so several processes charging one cap get exactly the cap between them, and
a connection dropped in the middle of a charge leaves all of it or none. On a real
server (``pg_url``)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from orchestrator.actions.budget import decide_charge  # noqa: E402 - after the skip
from orchestrator.domain.config import BatchConfig, PriceConfig, RecoveryConfig  # noqa: E402
from orchestrator.domain.errors import StateError  # noqa: E402
from orchestrator.storage.batch_budget import BatchBudget, Spend  # noqa: E402
from orchestrator.storage.budget import BudgetStore, ChargeKind  # noqa: E402
from orchestrator.storage.postgres import PostgresUnavailable, migrate  # noqa: E402
from orchestrator.storage.postgres.budgets import (  # noqa: E402
    PostgresBatchBudget,
    PostgresBudgets,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
PRICES = {"model-a": PriceConfig(input_per_mtok=3.0, output_per_mtok=15.0)}


@pytest.fixture
def db(pg_url: str) -> str:
    with psycopg.connect(pg_url) as conn:
        assert 3 in migrate(conn)
    return pg_url


def terminate(url: str, pid: int) -> None:
    """What an operator (or a failover) does to a session: end it from the server side."""
    with psycopg.connect(url, autocommit=True) as admin:
        (done,) = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        assert done


# --------------------------------------------------------------------------- same values


@pytest.mark.slow
def test_a_scripted_sequence_gives_the_file_stores_budgets(db: str, tmp_path: Path) -> None:
    in_file, pg = BudgetStore(tmp_path), PostgresBudgets(db)
    recovery = RecoveryConfig(max_retries_per_ticket=2, max_infra_retries_per_ticket=2)
    assert pg.load("T-1") == in_file.load("T-1")

    def retry(ticket: str, key: str, *, infra: bool, at: datetime) -> None:
        """The file store's way (decide under the ticket lock, then charge) and ours (both
        in one transaction) must grant, refuse and record the same."""
        kind: ChargeKind = "infra-retry" if infra else "retry"
        limit = recovery.max_infra_retries_per_ticket if infra else recovery.max_retries_per_ticket
        decided = decide_charge(
            in_file.load(ticket), key=key, infra=infra, recovery=recovery, now=at
        )
        if decided.granted:
            in_file.charge(ticket, kind, key, run_id="R-1", at=at)
        ours = pg.charge_within(ticket, kind, key, limit=limit, run_id="R-1", at=at)
        assert (ours.granted, ours.refusal) == (decided.granted, decided.refusal)
        assert ours.budget == in_file.load(ticket)

    steps: list[tuple[str, Any]] = [
        ("charge", ("T-1", "diagnosis", "R-1:d-1")),
        ("retry", ("T-1", "R-1:verdict-1", False)),
        ("charge", ("T-1", "diagnosis", "R-1:d-1")),  # the same key: no second charge
        ("retry", ("T-1", "R-1:verdict-1", False)),  # charged before a crash: granted, once
        ("retry", ("T-1", "R-1:verdict-2", False)),
        ("retry", ("T-1", "R-1:verdict-3", False)),  # past the cap: refused
        ("retry", ("T-1", "R-1:verdict-4", True)),
        ("charge", ("T-2", "infra-retry", "R-2:verdict-1")),
        ("reset", ("T-1", "alice", "provider fixed")),
        ("retry", ("T-1", "R-1:verdict-3", False)),  # counted from zero again
        ("retry", ("T-1", "R-1:verdict-1", False)),  # charged before the reset: still charged
        ("charge", ("T-1", "diagnosis", "R-1:d-2")),
        ("reset", ("T-1", "bob", "again")),
        ("charge", ("T-1", "retry", "R-1:verdict-5")),
    ]
    for n, (op, args) in enumerate(steps):
        at = T0 + timedelta(seconds=n, microseconds=123)
        if op == "charge":
            ticket, kind, key = args
            assert pg.charge(ticket, kind, key, run_id="R-1", at=at) == in_file.charge(
                ticket, kind, key, run_id="R-1", at=at
            )
        elif op == "retry":
            ticket, key, infra = args
            retry(ticket, key, infra=infra, at=at)
        else:
            ticket, by, reason = args
            assert pg.reset(ticket, by=by, reason=reason, at=at) == in_file.reset(
                ticket, by=by, reason=reason, at=at
            )
        for ticket in ("T-1", "T-2", "T-3"):
            assert pg.load(ticket) == in_file.load(ticket), (n, op)
    final = pg.load("T-1")
    assert [r.cleared for r in final.resets] == [
        {"diagnosis": 1, "retry": 2, "infra-retry": 1},
        {"diagnosis": 1, "retry": 1, "infra-retry": 0},
    ]
    assert final.spent("retry") == 1 and len(final.charges) == 7


def test_a_naive_time_is_refused_and_a_lost_server_named_without_its_password(
    db: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        PostgresBudgets(db).charge("T-1", "retry", "k", run_id="R", at=datetime(2026, 3, 1))
    gone = f"postgresql://postgres:s3cret@/nope?host={tmp_path}"
    with pytest.raises(PostgresUnavailable, match="cannot reach PostgreSQL") as caught:
        PostgresBudgets(gone).load("T-1")
    assert "s3cret" not in str(caught.value)
    with pytest.raises(PostgresUnavailable):
        PostgresBatchBudget(gone, "B-1", BatchConfig(), PRICES).reserve()


# --------------------------------------------------------------------------- processes


def _charge_many(url: str, worker: str, count: int, limit: int | None, start: Any) -> None:
    budgets = PostgresBudgets(url)
    start.wait()  # both begin together, so their charges really interleave
    for n in range(count):
        key = f"{worker}-{n}"
        if limit is None:
            budgets.charge("T-1", "retry", key, run_id=worker, at=T0)
        else:
            budgets.charge_within("T-1", "retry", key, limit=limit, run_id=worker, at=T0)


def _run_two(target: Any, *args: Any) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=target, args=(*args[:1], w, *args[1:], start)) for w in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0, 0]


@pytest.mark.slow
def test_two_processes_charging_one_cap_get_exactly_the_cap(db: str) -> None:
    _run_two(_charge_many, db, 30, 25)
    budget = PostgresBudgets(db).load("T-1")
    assert budget.spent("retry") == len(budget.charges) == 25
    assert len({c.key for c in budget.charges}) == 25
    refusal = PostgresBudgets(db).charge_within("T-1", "retry", "late", limit=25, run_id="R", at=T0)
    assert refusal.refusal == "retry cap spent (25/25 for this ticket)"
    with psycopg.connect(db) as conn:
        (count,) = conn.execute("SELECT charges FROM ticket_budgets").fetchone()
        positions = [p for (p,) in conn.execute("SELECT position FROM ticket_charges ORDER BY 1")]
    assert count == 25 and positions == list(range(25))


@pytest.mark.slow
def test_two_processes_charging_without_a_cap_lose_no_charge(db: str) -> None:
    _run_two(_charge_many, db, 40, None)
    budget = PostgresBudgets(db).load("T-1")
    assert sorted(c.key for c in budget.charges) == sorted(
        f"{w}-{n}" for w in "ab" for n in range(40)
    )


def _reserve_many(url: str, worker: str, count: int, start: Any) -> None:
    budget = PostgresBatchBudget(url, "B-1", BatchConfig(max_model_calls=25), PRICES)
    start.wait()
    for n in range(count):
        if budget.reserve(key=f"{worker}-{n}") is None:
            budget.record("model-a", 1000, 100, key=f"{worker}-{n}")


@pytest.mark.slow
def test_two_processes_reserving_one_batch_budget_get_exactly_its_calls(db: str) -> None:
    _run_two(_reserve_many, db, 30)
    budget = PostgresBatchBudget(db, "B-1", BatchConfig(max_model_calls=25), PRICES)
    assert budget.read() == Spend(25, 25_000, 2_500, 0.1125)
    assert budget.reserve() == "batch budget spent: 25/25 model calls"
    assert budget.reserve(key="a-0") is None  # a redelivered reservation: not counted again
    budget.record("model-a", 1000, 100, key="a-0")
    assert budget.read().calls == 25 and budget.read().input_tokens == 25_000


@pytest.mark.slow
def test_the_batch_budget_refuses_as_the_file_budget_does(db: str, tmp_path: Path) -> None:
    for caps in (
        BatchConfig(max_model_calls=3),
        BatchConfig(max_tokens=2500),
        BatchConfig(max_cost_usd=0.01),
    ):
        batch_id = f"B-{caps.max_model_calls}-{caps.max_tokens}"
        in_file = BatchBudget(tmp_path / batch_id / "budget.json", caps, PRICES)
        (tmp_path / batch_id).mkdir()
        pg = PostgresBatchBudget(db, batch_id, caps, PRICES)
        assert pg.read() == in_file.read() == Spend()
        for _ in range(5):
            assert pg.reserve() == in_file.reserve()
            pg.record("model-a", 1000, 200)
            in_file.record("model-a", 1000, 200)
            assert pg.read() == in_file.read()
        assert pg.reserve() is not None


# --------------------------------------------------------------------------- crashes


def test_a_connection_dropped_inside_a_charge_leaves_none_of_it(db: str) -> None:
    dropped: list[int] = []

    def drop(conn: Any) -> None:
        dropped.append(conn.info.backend_pid)
        terminate(db, conn.info.backend_pid)  # while it holds the ticket's row lock

    whole = PostgresBudgets(db)
    whole.charge("T-1", "retry", "first", run_id="R", at=T0)
    with pytest.raises(StateError, match="the PostgreSQL ticket budgets") as caught:
        PostgresBudgets(db, _mid_charge=drop).charge("T-1", "retry", "second", run_id="R", at=T0)
    assert dropped and "s3cret" not in str(caught.value)
    budget = whole.load("T-1")
    assert [c.key for c in budget.charges] == ["first"]
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT charges FROM ticket_budgets").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM ticket_charges").fetchone() == (1,)
    # The lock died with the session: the next charge goes on at the next position.
    again = whole.charge_within("T-1", "retry", "second", limit=2, run_id="R", at=T0)
    assert again.granted and [c.key for c in again.budget.charges] == ["first", "second"]


def test_a_connection_dropped_inside_a_reservation_leaves_none_of_it(db: str) -> None:
    caps = BatchConfig(max_model_calls=2)
    PostgresBatchBudget(db, "B-1", caps, PRICES).reserve(key="k-1")

    def drop(conn: Any) -> None:
        terminate(db, conn.info.backend_pid)

    with pytest.raises(StateError, match="the PostgreSQL budget of batch B-1"):
        PostgresBatchBudget(db, "B-1", caps, PRICES, _mid_charge=drop).reserve(key="k-2")
    budget = PostgresBatchBudget(db, "B-1", caps, PRICES)
    assert budget.read().calls == 1
    assert budget.reserve(key="k-2") is None  # the key was not kept: judged afresh
    assert budget.reserve(key="k-3") == "batch budget spent: 2/2 model calls"


def test_a_charge_waiting_on_a_dropped_one_goes_on_from_where_it_left(db: str) -> None:
    """One session holds the ticket's row lock mid-charge, a second waits on it; the
    first is terminated from the server side: nothing of it stays, the second charges."""
    holding, release = threading.Event(), threading.Event()
    pids: list[int] = []
    errors: list[BaseException] = []

    def hold(conn: Any) -> None:
        pids.append(conn.info.backend_pid)
        holding.set()
        release.wait(30)

    def first() -> None:
        try:
            PostgresBudgets(db, _mid_charge=hold).charge("T-1", "retry", "a", run_id="R", at=T0)
        except StateError as exc:
            errors.append(exc)

    budgets = PostgresBudgets(db)
    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert holding.wait(30)
    threads.append(
        threading.Thread(target=lambda: budgets.charge("T-1", "retry", "b", run_id="R", at=T0))
    )
    threads[1].start()
    with psycopg.connect(db, autocommit=True) as watcher:
        deadline = time.monotonic() + 30
        while not watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the second charge never waited on the lock"
    terminate(db, pids[0])
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(errors) == 1
    budget = budgets.load("T-1")
    assert [c.key for c in budget.charges] == ["b"]
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT charges FROM ticket_budgets").fetchone() == (1,)
