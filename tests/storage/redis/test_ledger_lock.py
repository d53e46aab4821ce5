"""The Redis lock that serialises ledger appends across machines."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.errors import LockLost, LockTimeout
from orchestrator.storage.redis.ledger_lock import RedisLock, ledger_lock

from support.fleet_fixtures import Workers
from support.redis_server import RedisServer


@pytest.mark.slow
def test_the_lock_serialises_appends_from_several_processes(
    redis_server: RedisServer, namespace: str, workers: Workers, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    processes, appends = 5, 40
    started = workers.start_together(
        "appender.py", [[redis_server.url, namespace, str(ledger), str(appends)]] * processes
    )
    for process in started:
        assert workers.finish(process) == ["done"]
    rows = [line.split() for line in ledger.read_text().splitlines()]
    # Each append read the last number and wrote the next: under the lock none was lost
    # or repeated, whichever process wrote it.
    assert [int(number) for number, _pid in rows] == list(range(1, processes * appends + 1))
    assert sorted(Counter(pid for _number, pid in rows).values()) == [appends] * processes


class FakeClock:
    """Time for the waiter: each pause advances it, so a bounded wait ends without
    waiting for real."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def test_a_waiter_gives_up_after_its_bounded_wait_naming_the_holder(
    store: CoordinationStore,
) -> None:
    holder = ledger_lock(store)
    token = holder.acquire()
    clock = FakeClock()
    waiter = RedisLock(store, "ledger", wait_s=2.0, _clock=clock, _pause=clock.pause)
    with pytest.raises(LockTimeout) as timed_out:
        waiter.acquire()
    assert str(timed_out.value) == (
        f"lock 'ledger' is still held by {token} after waiting 2 s; it expires by itself "
        f"30 s after its holder took it"
    )
    assert clock.now == pytest.approx(2.0)
    assert max(clock.pauses) == 0.05  # backed off, but never for long
    holder.release(token)
    assert waiter.acquire()


def test_a_crashed_holders_lock_expires_and_the_waiter_gets_it(store: CoordinationStore) -> None:
    crashed = RedisLock(store, "ledger", ttl_s=0.2)
    crashed.acquire()  # never released, as by a holder killed mid-append
    waiter = RedisLock(store, "ledger", wait_s=30.0)
    with waiter.held() as token:
        assert waiter.still_held(token)


def test_a_lock_that_expired_while_held_is_reported_when_released(
    store: CoordinationStore,
) -> None:
    lock = ledger_lock(store)
    with pytest.raises(LockLost, match=r"lock 'ledger' expired while held"):
        with lock.held() as token:
            store.client.delete(lock.key)  # what its expiry does on the server
            assert not lock.still_held(token)
            other = ledger_lock(store).acquire()
    assert store.client.get(lock.key) == other  # the other holder's lock was left alone


def test_a_failing_block_keeps_its_own_error_and_frees_the_lock(store: CoordinationStore) -> None:
    lock = ledger_lock(store)
    with pytest.raises(ValueError, match="torn row"), lock.held():
        raise ValueError("torn row")
    assert store.client.get(lock.key) is None
