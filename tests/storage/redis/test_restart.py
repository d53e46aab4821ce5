"""Redis restarted between operations: a clear error while it is down (naming it by its
masked URL), then the next call works again, without a new client."""

from __future__ import annotations

import queue
from collections.abc import Callable

import pytest

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import Heartbeat, Lease, TicketLeases
from orchestrator.storage.redis.errors import CoordinationUnavailable, FencedOut
from orchestrator.storage.redis.fleet_budget import Charged, FleetBudget
from orchestrator.storage.redis.ledger_lock import ledger_lock

from support.redis_server import RedisServer

PASSWORD = "s3cret-Redis-pw"
DEADLINE_S = 30.0


def lease_of(result: object) -> Lease:
    assert isinstance(result, Lease), result
    return result


def unavailable(redis_server: RedisServer, operation: Callable[[], object]) -> str:
    with pytest.raises(CoordinationUnavailable) as down:
        operation()
    message = str(down.value)
    assert message.startswith(
        f"coordination store unavailable: redis://:***@127.0.0.1:{redis_server.port}/0: "
    ), message
    assert PASSWORD not in message
    return message


def test_a_stopped_server_is_a_clear_error_and_the_next_call_after_its_restart_works(
    redis_servers: Callable[..., RedisServer], namespace: str
) -> None:
    server = redis_servers(password=PASSWORD)
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    leases = TicketLeases(store, ttl_s=30)
    budget = FleetBudget(store, "B-1", "calls", 10)
    lock = ledger_lock(store, wait_s=5)
    before = lease_of(leases.acquire("T-1"))
    assert budget.charge("call-1") == Charged(1, False)

    server.stop()
    message = unavailable(server, lambda: leases.acquire("T-2"))
    assert "Connection refused" in message
    unavailable(server, lambda: budget.charge("call-2"))
    unavailable(server, lambda: leases.fence(before).check())
    unavailable(server, lock.acquire)

    server.start()  # same port, empty: this server keeps nothing across a restart
    # The lease's record went with the data: its holder may no longer write (the safe side).
    with pytest.raises(FencedOut, match=r"has no record of its lease \(was Redis restarted"):
        leases.fence(before).check()
    assert lease_of(leases.acquire("T-2")).fence == 1
    assert budget.charge("call-2") == Charged(1, False)  # the Lua scripts are loaded again
    with lock.held() as token:
        assert lock.still_held(token)


def test_with_persistence_a_lease_and_its_fence_survive_a_restart(
    redis_servers: Callable[..., RedisServer], namespace: str
) -> None:
    server = redis_servers(persist=True, password=PASSWORD)
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    leases = TicketLeases(store, ttl_s=60)
    lease = lease_of(leases.acquire("T-1"))
    budget = FleetBudget(store, "B-1", "calls", 2)
    assert budget.charge("call-1") == Charged(1, False)
    server.restart()
    leases.fence(lease).check()
    assert leases.renew(lease) is True
    assert budget.charge("call-1") == Charged(1, True)
    assert budget.charge("call-2") == Charged(2, False)


def test_the_heartbeat_rides_out_a_restart(
    redis_servers: Callable[..., RedisServer], namespace: str
) -> None:
    server = redis_servers(persist=True)
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    leases = TicketLeases(store, ttl_s=60)
    lease = lease_of(leases.acquire("T-1"))
    beats: queue.Queue[bool | None] = queue.Queue()

    def next_beat() -> bool | None:
        return beats.get(timeout=DEADLINE_S)

    with Heartbeat(leases, lease, interval_s=0.02, _on_beat=beats.put) as heartbeat:
        assert next_beat() is True
        server.stop()
        while next_beat() is not None:
            pass  # a beat already on its way before the stop
        assert heartbeat.last_error is not None
        assert heartbeat.last_error.startswith("coordination store unavailable: redis://")
        server.start()
        while (beat := next_beat()) is None:
            pass
        assert beat is True
        assert not heartbeat.lost.is_set()
    leases.fence(lease).check()


def test_a_restart_between_loading_a_script_and_running_it_is_ridden_out(
    redis_servers: Callable[..., RedisServer], namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a fleet met under load: the script's first run found the cache empty, the
    client loaded it, and the server restarted before the run that follows the load (the
    client's retry of the refused connection lands on the new, empty server). The restart
    is real; only its moment is chosen, by stepping in right after the load."""
    server = redis_servers()
    store = CoordinationStore(BrokerUrl(server.url), namespace=namespace)
    budget = FleetBudget(store, "B-1", "calls", 10)
    assert budget.charge("call-1") == Charged(1, False)
    store.client.script_flush()  # as after an earlier restart: the next run must load it
    loads: list[str] = []
    load = store.client.script_load

    def load_then_restart(source: str) -> str:
        sha = load(source)
        loads.append(sha)
        if len(loads) == 1:
            server.stop()
            server.start()  # empty: the script just loaded is gone again
        return sha

    monkeypatch.setattr(store.client, "script_load", load_then_restart)
    # The restart emptied the budget's count too (this server keeps nothing): 1 again.
    assert budget.charge("call-2") == Charged(1, False)
    assert len(loads) == 2  # loaded once on each server
