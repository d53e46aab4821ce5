"""A ticket claimed on PostgreSQL leases: one holder at a time, refused by name, kept alive
by a heartbeat across a lease's lifetime and across a server restart, and lost (with its
fenced writes refused) once another worker took the ticket. On a real server (``pg_url``);
the tests wait on the heartbeat's beats and on the database's clock, never a guessed time."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from orchestrator.domain.runs import RunRecord, StageRecord, new_run_id  # noqa: E402
from orchestrator.storage.postgres import (  # noqa: E402
    LeaseToken,
    PostgresClaim,
    PostgresLeases,
    claim,
    migrate,
)
from orchestrator.storage.postgres.claim import BeatOutcome  # noqa: E402
from orchestrator.storage.redis import FencedOut, TicketClaimed  # noqa: E402

from support.postgres_server import PostgresServer  # noqa: E402
from support.run_records import publish_record  # noqa: E402

DEADLINE_S = 15.0
AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def db(pg_url: str) -> str:
    with psycopg.connect(pg_url) as conn:
        assert 4 in migrate(conn)
    return pg_url


def ask(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(sql, params).fetchone()
    return None if found is None else found[0]


def lease_row(url: str, ticket_id: str) -> tuple[str | None, int, bool]:
    """The ticket's lease: holder, token, and whether it lasts on the database's clock."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT holder, token, expires_at > clock_timestamp() FROM ticket_leases "
            "WHERE ticket_id = %s",
            (ticket_id,),
        ).fetchone()
    assert found is not None, f"no lease row for {ticket_id}"
    return found[0], int(found[1]), bool(found[2])


def wait_expired(url: str, ticket_id: str) -> None:
    """Until the lease has run out on the database's clock: the server sleeps until its
    expiry (``pg_sleep_until``), so nothing here guesses how long that is."""
    for _ in range(20):
        if not lease_row(url, ticket_id)[2]:
            return
        ask(
            url,
            "SELECT pg_sleep_until(expires_at) FROM ticket_leases WHERE ticket_id = %s",
            (ticket_id,),
        )
    pytest.fail(f"{ticket_id}'s lease never ran out")


class Beats:
    """What the heartbeat heard, beat by beat, to wait on with a deadline."""

    def __init__(self) -> None:
        self.heard: list[BeatOutcome] = []
        self._changed = threading.Condition()

    def __call__(self, outcome: BeatOutcome) -> None:
        with self._changed:
            self.heard.append(outcome)
            self._changed.notify_all()

    def wait_for(self, holds: Callable[[list[BeatOutcome]], bool], what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: holds(self.heard), timeout=DEADLINE_S):
                pytest.fail(f"timed out waiting for {what}; heard {self.heard}")

    def next_one(self) -> BeatOutcome:
        """The outcome of the next beat after this call."""
        with self._changed:
            seen = len(self.heard)
        self.wait_for(lambda heard: len(heard) > seen, "the next beat")
        return self.heard[seen]


def a_record(ticket_id: str) -> RunRecord:
    run_id = new_run_id(ticket_id, AT)
    return RunRecord(
        run_id=run_id, ticket_id=ticket_id, ticket_title="Fix it", ticket_kind="bug",
        ticket_path=f"/t/{ticket_id}.md", ticket_snapshot="/s/t.md", ticket_sha256="0" * 64,
        repository="/r.git", base_branch="main", work_branch=f"orchestrator/{ticket_id}",
        config_path="/c.toml", config_sha256="0" * 64, run_dir=f"/s/runs/{run_id}",
        clone_dir=f"/s/runs/{run_id}/clone", created_at=AT, updated_at=AT,
        stages=(StageRecord(name="implement"),),
    )  # fmt: skip


@pytest.fixture
def beats() -> Beats:
    return Beats()


def test_a_claim_holds_renews_and_releases_the_lease(db: str, tmp_path: Path) -> None:
    leases = PostgresLeases(db)
    with claim(leases, "T-1", ttl_s=30, holder="worker-a") as held:
        assert isinstance(held, PostgresClaim)
        assert held.fence == LeaseToken("T-1", 1)
        assert lease_row(db, "T-1") == ("worker-a", 1, True)
        assert held.beat() is True
        assert (held.renewals, held.lost, held.last_error) == (1, False, None)
        publish_record(db, tmp_path, a_record("T-1"), fence=held.fence)
    assert lease_row(db, "T-1")[0] is None  # released: the next claim takes token 2
    with claim(leases, "T-1", ttl_s=30, holder="worker-b") as after:
        assert after.fence == LeaseToken("T-1", 2)


def test_a_claim_is_released_when_its_block_raises(db: str) -> None:
    with pytest.raises(RuntimeError, match="the stage broke"):
        with claim(PostgresLeases(db), "T-1", ttl_s=30):
            raise RuntimeError("the stage broke")
    assert lease_row(db, "T-1") == (None, 1, False)


def test_a_second_claimer_is_refused_naming_the_holder(db: str) -> None:
    leases = PostgresLeases(db)
    with claim(leases, "T-1", ttl_s=30) as first:
        assert re.fullmatch(r"[^:]+:\d+:[0-9a-f]{16}", first.holder)
        with pytest.raises(TicketClaimed) as refused:
            with claim(leases, "T-1", ttl_s=30, holder="worker-b"):
                pytest.fail("two holders of one ticket")
        assert str(refused.value) == (f"ticket T-1 is claimed by another worker ({first.holder})")
        assert refused.value.holder == first.holder
        # The refused claimer released nothing of the first one's.
        assert lease_row(db, "T-1") == (first.holder, 1, True)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_the_heartbeat_keeps_a_one_second_lease_for_three_seconds(
    db: str, beats: Beats, tmp_path: Path
) -> None:
    leases = PostgresLeases(db)
    with claim(leases, "T-1", ttl_s=1.0, holder="worker-a", _on_beat=beats) as held:
        started = ask(db, "SELECT clock_timestamp()")
        # Three seconds on the database's clock, checked at every beat: never run out.
        while ask(db, "SELECT clock_timestamp() - %s > interval '3 seconds'", (started,)) is False:
            assert beats.next_one() is True
            assert lease_row(db, "T-1") == ("worker-a", 1, True)
        assert held.renewals >= 6  # every third of a second, for three seconds
        with pytest.raises(TicketClaimed):
            with claim(leases, "T-1", ttl_s=1.0, holder="worker-b"):
                pass
        publish_record(db, tmp_path, a_record("T-1"), fence=held.fence)
    assert not held.lost


def test_a_claim_whose_lease_ran_out_and_was_taken_is_lost(db: str, tmp_path: Path) -> None:
    leases = PostgresLeases(db)
    with claim(leases, "T-1", ttl_s=0.5, holder="worker-a") as held:
        held._stop_heartbeat()  # paused past its lease
        wait_expired(db, "T-1")
        assert leases.acquire("T-1", "worker-b", 30) == 2
        assert held.beat() is False
        assert held.lost
        with pytest.raises(FencedOut, match="another worker took it over by worker-b"):
            publish_record(db, tmp_path, a_record("T-1"), fence=held.fence)
    # Leaving the block released nothing of worker-b's.
    assert lease_row(db, "T-1") == ("worker-b", 2, True)


def test_the_heartbeat_marks_the_claim_lost_and_stops(db: str, beats: Beats) -> None:
    with claim(PostgresLeases(db), "T-1", ttl_s=0.6, holder="worker-a", _on_beat=beats) as held:
        beats.wait_for(lambda heard: True in heard, "a renewal")
        # Taken over behind its back (as a takeover after an unnoticed expiry would).
        ask(
            db,
            "UPDATE ticket_leases SET holder = 'worker-b', token = token + 1 "
            "WHERE ticket_id = 'T-1' RETURNING token",
        )
        beats.wait_for(lambda heard: heard[-1] is False, "the beat that finds it lost")
        assert held.lost
        held._heartbeat._thread.join(DEADLINE_S)
        assert not held._heartbeat._thread.is_alive()
        assert beats.heard.count(False) == 1  # it stopped beating once lost


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_the_heartbeat_survives_a_server_restart(
    db: str, beats: Beats, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    leases = PostgresLeases(db)
    with claim(leases, "T-1", ttl_s=0.6, holder="worker-a", _on_beat=beats) as held:
        beats.wait_for(lambda heard: True in heard, "a renewal before the restart")
        postgres_server.stop()
        beats.wait_for(lambda heard: heard[-1] is None, "a beat that cannot reach it")
        assert held.last_error is not None
        assert held.last_error.startswith("cannot reach PostgreSQL at postgresql://postgres:***@")
        assert postgres_server.password not in held.last_error
        assert not held.lost
        postgres_server.start()
        beats.wait_for(
            lambda heard: None in heard and heard[-1] is True, "a renewal after the restart"
        )
        assert held.last_error is None and not held.lost
        # Renewed after the restart: the lease lasts again and its writes pass the fence.
        assert lease_row(db, "T-1") == ("worker-a", 1, True)
        publish_record(db, tmp_path, a_record("T-1"), fence=held.fence)


def test_a_release_that_cannot_reach_the_database_is_left_to_expire(
    db: str, postgres_server: PostgresServer
) -> None:
    with claim(PostgresLeases(db), "T-1", ttl_s=30, holder="worker-a") as held:
        held._stop_heartbeat()
        postgres_server.stop()
    postgres_server.start()
    assert lease_row(db, "T-1") == ("worker-a", 1, True)  # not released: it runs out
