"""The per-ticket lease and its fencing token, against a real redis-server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord, StageRecord, StageStatus, new_run_id
from orchestrator.storage.approvals import Approval
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.decisions import VerdictRecord
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import VerdictFile
from orchestrator.storage.protocols import Runs
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import (
    Heartbeat,
    HeldElsewhere,
    Lease,
    TicketLeases,
    claim,
)
from orchestrator.storage.redis.errors import FencedOut, TicketClaimed
from orchestrator.storage.redis.fence import NO_FENCE, Fence
from orchestrator.storage.redis.fenced_stores import (
    FencedApprovals,
    FencedBudgets,
    FencedDecisions,
    FencedRunStore,
)

from conftest import subprocess_env
from support import SUPPORT
from support.redis_server import RedisServer

NOW = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
DEADLINE_S = 30.0


def lease_of(result: Lease | HeldElsewhere) -> Lease:
    assert isinstance(result, Lease), result
    return result


def lease_key(store: CoordinationStore, ticket: str) -> str:
    return store.key("ticket", ticket, "lease")


def lease_runs_out(store: CoordinationStore, ticket: str) -> None:
    """What the lease's expiry does on the server (the key is gone), without waiting for
    it; the SIGSTOP test below waits for a real expiry."""
    store.client.delete(lease_key(store, ticket))


def race(contenders: list[TicketLeases], ticket: str) -> list[Lease | HeldElsewhere]:
    """Every contender asks for the ticket's lease at once (released by one barrier)."""
    barrier = threading.Barrier(len(contenders))
    results: list[Lease | HeldElsewhere] = [HeldElsewhere(ticket, "")] * len(contenders)

    def contend(index: int) -> None:
        barrier.wait()
        results[index] = contenders[index].acquire(ticket)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(contenders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_clients_racing_for_a_lease_exactly_one_wins(
    redis_server: RedisServer, namespace: str
) -> None:
    contenders = 4
    stores = [
        CoordinationStore(BrokerUrl(redis_server.url), namespace=namespace)
        for _ in range(contenders)
    ]
    for store in stores:
        store.ping()  # connected before the race, so the race is at the server
    for round_number in range(25):
        ticket = f"T-{round_number}"
        results = race([TicketLeases(store, ttl_s=30) for store in stores], ticket)
        winners = [r for r in results if isinstance(r, Lease)]
        assert len(winners) == 1, results
        assert winners[0].fence == 1
        losers = [r for r in results if isinstance(r, HeldElsewhere)]
        assert {loser.holder for loser in losers} == {winners[0].holder}
    for store in stores:
        store.close()


def test_only_the_holder_releases_and_each_win_takes_a_new_fencing_token(
    store: CoordinationStore,
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    first = lease_of(leases.acquire("T-1"))
    impostor = Lease("T-1", "other-host:1:feedface", first.fence, first.ttl_s)
    assert leases.release(impostor) is False
    assert leases.acquire("T-1") == HeldElsewhere("T-1", first.holder)
    assert leases.release(first) is True
    # Again (its answer lost, say): still given back, and nobody's lease is touched.
    assert leases.release(first) is True
    second = lease_of(leases.acquire("T-1"))
    assert second.fence == 2
    assert second.holder != first.holder
    assert leases.release(first) is False  # now another holder's: left alone
    assert store.client.get(lease_key(store, "T-1")) == second.holder
    # Another ticket's counter is its own.
    assert lease_of(leases.acquire("T-2")).fence == 1


def test_a_lease_that_ran_out_unclaimed_is_renewed_and_still_fences_for_its_holder(
    store: CoordinationStore,
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    lease = lease_of(leases.acquire("T-1"))
    lease_runs_out(store, "T-1")
    assert leases.renew(lease) is True  # nobody took it: the holder keeps it
    assert store.client.get(lease_key(store, "T-1")) == lease.holder
    leases.fence(lease).check()
    assert isinstance(leases.acquire("T-1"), HeldElsewhere)


def test_a_taken_over_holder_cannot_renew_and_its_fence_refuses_naming_both_tokens(
    store: CoordinationStore,
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    old = lease_of(leases.acquire("T-1"))
    lease_runs_out(store, "T-1")
    new = lease_of(leases.acquire("T-1"))
    assert leases.renew(old) is False
    with pytest.raises(FencedOut) as refused:
        leases.fence(old).check()
    assert str(refused.value) == (
        f"fenced out: ticket T-1: this worker's fencing token is 1, but another worker took "
        f"it over by {new.holder} (current fencing token 2); nothing was written, the "
        f"ticket is the other worker's now"
    )
    assert (refused.value.held, refused.value.current) == (1, 2)
    leases.fence(new).check()
    assert leases.release(old) is False  # the old holder cannot free the new one's lease
    assert store.client.get(lease_key(store, "T-1")) == new.holder


def test_the_heartbeat_keeps_a_lease_past_its_time_to_live(store: CoordinationStore) -> None:
    leases = TicketLeases(store, ttl_s=1.0)
    lease = lease_of(leases.acquire("T-1"))
    beats = threading.Semaphore(0)
    outcomes: list[bool | None] = []

    def beat(held: bool | None) -> None:
        outcomes.append(held)
        beats.release()

    with Heartbeat(leases, lease, _on_beat=beat) as heartbeat:
        for _ in range(4):  # four renewals at a third of the TTL: past the TTL
            assert beats.acquire(timeout=DEADLINE_S)
        assert isinstance(leases.acquire("T-1"), HeldElsewhere)
        assert not heartbeat.lost.is_set()
    assert outcomes[:4] == [True] * 4
    leases.fence(lease).check()


def test_the_heartbeat_says_when_the_lease_was_lost(store: CoordinationStore) -> None:
    leases = TicketLeases(store, ttl_s=30)
    lease = lease_of(leases.acquire("T-1"))
    lease_runs_out(store, "T-1")
    lease_of(leases.acquire("T-1"))
    with Heartbeat(leases, lease, interval_s=0.01) as heartbeat:
        assert heartbeat.lost.wait(DEADLINE_S)


# ------------------------------------------------------------------ a paused holder


def read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the holder exited: {process.wait()}"
    return line.rstrip("\n")


def send(process: subprocess.Popen[str], command: str) -> str:
    assert process.stdin is not None
    process.stdin.write(command + "\n")
    process.stdin.flush()
    return read_line(process)


@pytest.fixture
def holder_process(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    output = tmp_path / "owner.txt"
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "lease_holder.py"), redis_server.url, namespace, "T-1", "1.0", str(output)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        start_new_session=True,
    )  # fmt: skip
    try:
        yield process, output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until_expired(store: CoordinationStore, key: str) -> None:
    """Block on the server's own expiry event for ``key`` (keyspace notifications)."""
    store.client.config_set("notify-keyspace-events", "Ex")
    pubsub = store.client.pubsub()
    pubsub.subscribe("__keyevent@0__:expired")
    try:
        deadline = time.monotonic() + DEADLINE_S
        if store.client.exists(key) == 0:
            return  # expired before we subscribed
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=deadline - time.monotonic())
            if message and message["type"] == "message" and message["data"] == key:
                return
        raise AssertionError(f"{key} did not expire within {DEADLINE_S} s")
    finally:
        pubsub.close()


@pytest.mark.slow
def test_a_holder_stopped_past_its_lease_is_fenced_out_after_another_took_over(
    holder_process: tuple[subprocess.Popen[str], Path], store: CoordinationStore
) -> None:
    process, output = holder_process
    held = read_line(process)
    assert held.startswith("held 1 "), held
    old_holder = held.split(" ", 2)[2]
    assert send(process, "write first") == "wrote"

    os.killpg(process.pid, signal.SIGSTOP)  # its heartbeat stops with it
    leases = TicketLeases(store, ttl_s=30)
    while True:  # a heartbeat that ran just before the stop may have renewed it once more
        wait_until_expired(store, lease_key(store, "T-1"))
        taken = leases.acquire("T-1")
        if isinstance(taken, Lease):
            break
    assert taken.fence == 2
    leases.fence(taken).check()
    output.write_text("second")

    os.killpg(process.pid, signal.SIGCONT)
    assert send(process, "renew") == "renewed False"
    refusal = send(process, "write stale")
    assert refusal == (
        f"fenced fenced out: ticket T-1: this worker's fencing token is 1, but another "
        f"worker took it over by {taken.holder} (current fencing token 2); nothing was "
        f"written, the ticket is the other worker's now"
    )
    assert output.read_text() == "second"
    assert send(process, "quit") == "released False"  # it cannot free the new lease
    assert process.wait(timeout=DEADLINE_S) == 0
    assert store.client.get(lease_key(store, "T-1")) == taken.holder
    assert old_holder != taken.holder


# ------------------------------------------------------------------ the run store seam


def record(state_dir: Path, note: str) -> RunRecord:
    run_id = new_run_id("T-1", NOW)
    run_dir = state_dir / "runs" / run_id
    return RunRecord(
        run_id=run_id, ticket_id="T-1", ticket_title=note, ticket_kind="bug-fix",
        ticket_path="/q/T-1.md", ticket_snapshot=str(run_dir / "ticket" / "T-1.md"),
        ticket_sha256="0" * 64, repository="/srv/origin.git", base_branch="main",
        work_branch="orchestrator/T-1", config_path="/srv/config.toml", config_sha256="",
        run_dir=str(run_dir), clone_dir=str(run_dir / "clone"), created_at=NOW,
        updated_at=NOW, state=RunState.RUNNING,
        stages=(StageRecord(name="clone", status=StageStatus.COMPLETED),),
    )  # fmt: skip


def test_a_fenced_run_store_refuses_every_write_of_a_taken_over_worker(
    store: CoordinationStore, tmp_path: Path
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    old = lease_of(leases.acquire("T-1"))
    old_runs: Runs = FencedRunStore(tmp_path / "state", leases.fence(old))
    first = record(tmp_path / "state", "saved by the first worker")
    old_runs.save(first)

    lease_runs_out(store, "T-1")
    new = lease_of(leases.acquire("T-1"))
    new_runs: Runs = FencedRunStore(tmp_path / "state", leases.fence(new))
    new_runs.save(first.model_copy(update={"ticket_title": "saved by the second worker"}))

    writes = {
        "save": lambda: old_runs.save(first),
        "bundle": lambda: old_runs.write_bundle(first.run_id, 1, "{}"),
        "handoff": lambda: old_runs.write_handoff(first.run_id, "stale"),
        "fix report": lambda: old_runs.write_mechanical_fix(first.run_id, 1, {}),
        "workspace": lambda: old_runs.write_workspace_files(
            first.run_id, {old_runs.run_dir(first.run_id) / "prompt-1.txt": "stale"}
        ),
    }
    for what, write in writes.items():
        with pytest.raises(FencedOut, match=r"ticket T-1: this worker's fencing token is 1"):
            write()
        assert old_runs.load(first.run_id).ticket_title == "saved by the second worker", what
    assert sorted(p.name for p in (tmp_path / "state" / "runs").iterdir()) == [
        f"{first.run_id}.json"
    ]


class TakenOverMidWrite:
    """The old holder's fence, whose first check passes and then (as if the worker were
    paused right after it, in the write's fsync) lets the lease run out and another
    worker take the ticket and save its own record."""

    def __init__(self, fence: Fence, takeover: Callable[[], None]) -> None:
        self.fence = fence
        self.takeover: Callable[[], None] | None = takeover

    def check(self) -> None:
        self.fence.check()
        if self.takeover is not None:
            takeover, self.takeover = self.takeover, None
            takeover()


def test_a_takeover_between_the_check_and_the_rename_still_refuses_the_stale_write(
    store: CoordinationStore, tmp_path: Path
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    old = lease_of(leases.acquire("T-1"))
    first = record(tmp_path / "state", "saved by the first worker")
    FencedRunStore(tmp_path / "state", leases.fence(old)).save(first)

    def another_worker_takes_it() -> None:
        lease_runs_out(store, "T-1")
        new = lease_of(leases.acquire("T-1"))
        new_runs = FencedRunStore(tmp_path / "state", leases.fence(new))
        new_runs.save(first.model_copy(update={"ticket_title": "saved by the second worker"}))

    fence = TakenOverMidWrite(leases.fence(old), another_worker_takes_it)
    old_runs: Runs = FencedRunStore(tmp_path / "state", fence)
    with pytest.raises(FencedOut, match=r"ticket T-1: this worker's fencing token is 1"):
        old_runs.save(first.model_copy(update={"ticket_title": "stale"}))
    assert old_runs.load(first.run_id).ticket_title == "saved by the second worker"
    # The refused write leaves no temp file behind.
    assert sorted(p.name for p in (tmp_path / "state" / "runs").iterdir()) == [
        f"{first.run_id}.json"
    ]


def test_the_local_fence_lets_every_write_through(tmp_path: Path) -> None:
    fence: Fence = NO_FENCE
    runs = FencedRunStore(tmp_path / "state", fence)
    saved = record(tmp_path / "state", "local")
    runs.save(saved)
    assert runs.load(saved.run_id) == saved


class VerdictFilesSeen:
    """Decisions that only note what reached them (a verdict record takes a whole
    decision to build; the wrapper's gate is what is tested here)."""

    def __init__(self) -> None:
        self.written: list[VerdictRecord] = []

    def path(self, run_id: str, number: int) -> Path:
        return Path(f"/nowhere/{run_id}.verdict-{number}.json")

    def write(self, record: VerdictRecord) -> Path:
        self.written.append(record)
        return self.path(record.run_id, record.number)

    def read(self, run_id: str, number: int) -> VerdictRecord:
        raise AssertionError("not read here")

    def find(self, *, run_id: str | None = None, ticket_id: str | None = None) -> list[VerdictFile]:
        return []


def test_verdicts_approvals_and_charges_of_a_taken_over_worker_are_refused(
    store: CoordinationStore, tmp_path: Path
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    old = lease_of(leases.acquire("T-1"))
    lease_runs_out(store, "T-1")
    lease_of(leases.acquire("T-1"))
    fence = leases.fence(old)
    files = FileStorage(tmp_path / "state")
    budgets = FencedBudgets(BudgetStore(tmp_path / "state"), fence)
    approvals = FencedApprovals(files.approvals, fence)
    seen = VerdictFilesSeen()
    decisions = FencedDecisions(seen, fence)
    run_id = new_run_id("T-1", NOW)
    approval = Approval(
        decision_id=f"{run_id}:verdict-1", run_id=run_id, verdict=1, approved=True,
        by="auto", at=NOW, routing="auto",
    )  # fmt: skip
    with pytest.raises(FencedOut):
        budgets.charge("T-1", "diagnosis", f"{run_id}:verdict-1", run_id=run_id, at=NOW)
    with pytest.raises(FencedOut):
        approvals.write(approval)
    with pytest.raises(FencedOut):
        decisions.write(VerdictRecord.model_construct(run_id=run_id, number=1))
    assert budgets.load("T-1").charges == ()
    assert not approvals.answered(run_id, 1)
    assert seen.written == []
    assert list((tmp_path / "state").rglob("*.json")) == []


def test_the_same_stores_write_for_the_current_holder(
    store: CoordinationStore, tmp_path: Path
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    fence = leases.fence(lease_of(leases.acquire("T-1")))
    budgets = FencedBudgets(BudgetStore(tmp_path / "state"), fence)
    run_id = new_run_id("T-1", NOW)
    charged = budgets.charge("T-1", "diagnosis", f"{run_id}:verdict-1", run_id=run_id, at=NOW)
    assert [c.key for c in charged.charges] == [f"{run_id}:verdict-1"]
    seen = VerdictFilesSeen()
    record = VerdictRecord.model_construct(run_id=run_id, number=1)
    FencedDecisions(seen, fence).write(record)
    assert seen.written == [record]


# ------------------------------------------------------------------ a worker's claim


def test_a_claim_holds_the_ticket_for_its_block_and_gives_it_back(
    store: CoordinationStore, tmp_path: Path
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    with claim(leases, "T-1") as held:
        assert store.client.get(lease_key(store, "T-1")) == held.lease.holder
        with pytest.raises(TicketClaimed) as refused:
            with claim(leases, "T-1"):
                pass
        assert str(refused.value) == (
            f"ticket T-1 is claimed by another worker ({held.lease.holder})"
        )
        runs = FencedRunStore(tmp_path / "state", held.fence)
        runs.save(record(tmp_path / "state", "written under the claim"))
        assert not held.heartbeat.lost.is_set()
    assert store.client.get(lease_key(store, "T-1")) is None
    with claim(leases, "T-1") as again:
        assert again.lease.fence == 2


def test_a_claim_taken_over_midway_leaves_the_new_holders_lease_alone(
    store: CoordinationStore,
) -> None:
    leases = TicketLeases(store, ttl_s=30)
    with claim(leases, "T-1") as held:
        lease_runs_out(store, "T-1")
        taken = lease_of(leases.acquire("T-1"))
        with pytest.raises(FencedOut):
            held.fence.check()
    assert store.client.get(lease_key(store, "T-1")) == taken.holder
