"""A command that ran but whose answer was lost (the network dropped, or Redis was
restarted between running it and answering) is sent again by the client on a new
connection. Every write of the fleet must read its own earlier effect as its own:

* a lease won by the first send is this worker's lease, with the fencing token that send
  took (not "claimed by another worker": its own token, and a wait of a whole lease);
* a ticket marked queued by the first send is this batch's to queue (not "already queued
  by another batch": a task nobody sends, and a batch that waits for it for hours);
* the ledger lock taken by the first send is held (not a wait until it expires);
* a lock or lease given back by the first send is given back (not "expired while held");
* a budget charge counted by the first send is not counted twice.

The proxy in between is real TCP in front of a real Redis (``tests/support/lossy_proxy.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.batch.celery.enqueued import Enqueued
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import Lease, TicketLeases
from orchestrator.storage.redis.fleet_budget import Charged, FleetBudget
from orchestrator.storage.redis.ledger_lock import ledger_lock

from support.lossy_proxy import LossyProxy


@pytest.fixture
def lossy_store(proxy: LossyProxy, namespace: str) -> Iterator[CoordinationStore]:
    coordination = CoordinationStore(BrokerUrl(proxy.url()), namespace=namespace)
    yield coordination
    coordination.close()


def test_a_lease_won_by_a_send_whose_answer_was_lost_is_this_workers(
    proxy: LossyProxy, lossy_store: CoordinationStore, store: CoordinationStore
) -> None:
    leases = TicketLeases(lossy_store, ttl_s=60)
    assert isinstance(leases.acquire("T-warm"), Lease)  # the script is loaded
    proxy.lose_answer_to(b"ticket:T-1:lease")
    won = leases.acquire("T-1")
    assert proxy.lost.is_set()
    assert isinstance(won, Lease), won
    assert won.fence == 1  # the first send's fencing token, not a second one
    leases.fence(won).check()  # the fence names this holder
    # Anyone else still finds the ticket held, by this holder.
    other = TicketLeases(store, ttl_s=60).acquire("T-1")
    assert not isinstance(other, Lease) and other.holder == won.holder


def test_a_ticket_marked_queued_by_a_send_whose_answer_was_lost_is_this_batchs(
    proxy: LossyProxy, lossy_store: CoordinationStore, store: CoordinationStore
) -> None:
    enqueued = Enqueued(lossy_store)
    assert enqueued.mark("T-warm", "task-0", keep_s=60) is None
    proxy.lose_answer_to(b"ticket:T-1:enqueued")
    assert enqueued.mark("T-1", "task-1", keep_s=60) is None  # ours: send it
    assert proxy.lost.is_set()
    # Another batch still finds it queued, as task-1.
    assert Enqueued(store).mark("T-1", "task-2", keep_s=60) == "task-1"


def test_the_ledger_lock_taken_by_a_send_whose_answer_was_lost_is_held(
    proxy: LossyProxy, lossy_store: CoordinationStore
) -> None:
    lock = ledger_lock(lossy_store, ttl_s=60, wait_s=1)
    with lock.held():
        pass  # the scripts are loaded
    proxy.lose_answer_to(b"lock:ledger")
    with lock.held() as token:  # not a LockTimeout after a second
        assert proxy.lost.is_set()
        assert lock.still_held(token)
    assert lossy_store.call(lambda client: client.get(lock.key)) is None


def test_a_lock_and_a_lease_given_back_by_a_send_whose_answer_was_lost_are_given_back(
    proxy: LossyProxy, lossy_store: CoordinationStore
) -> None:
    lock = ledger_lock(lossy_store, ttl_s=60, wait_s=1)
    with lock.held():
        pass  # the scripts are loaded
    token = lock.acquire()
    proxy.lose_answer_to(token.encode())
    lock.release(token)  # not LockLost
    assert proxy.lost.is_set()
    assert lossy_store.call(lambda client: client.get(lock.key)) is None

    leases = TicketLeases(lossy_store, ttl_s=60)
    warm = leases.acquire("T-warm")
    assert isinstance(warm, Lease) and leases.release(warm)  # the scripts are loaded
    lease = leases.acquire("T-1")
    assert isinstance(lease, Lease)
    proxy.lose_answer_to(lease.holder.encode())
    assert leases.release(lease) is True
    assert proxy.lost.is_set()
    assert isinstance(leases.acquire("T-1"), Lease)


def test_a_charge_counted_by_a_send_whose_answer_was_lost_counts_once(
    proxy: LossyProxy, lossy_store: CoordinationStore, store: CoordinationStore
) -> None:
    budget = FleetBudget(lossy_store, "B-1", "calls", 10)
    assert budget.charge("call-0") == Charged(1, False)
    proxy.lose_answer_to(b"call-1")
    # Counted by the first send; the second finds it counted (nothing added again).
    assert budget.charge("call-1") == Charged(2, True)
    assert proxy.lost.is_set()
    assert FleetBudget(store, "B-1", "calls", 10).charge("call-2") == Charged(3, False)
