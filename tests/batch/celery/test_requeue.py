"""With a fleet configured, ``approve`` and ``resume`` hand the run to a worker: the
answer (or the resume) is recorded here, the ticket is queued as one task to the fleet's
Redis, and the worker that takes it carries the rest out in its own environment — never
the approver's shell. The queued message is read back from Redis and run through the
worker's own task function."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orchestrator.batch.celery.celery_app import broker_keys
from orchestrator.batch.celery.requeue import located
from orchestrator.batch.celery.ticket_task import WorkerContext, run_claimed
from orchestrator.cli.commands.approve import answer
from orchestrator.cli.commands.resume import resume
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.reports.handoff import MARKDOWN
from orchestrator.storage import FileStorage
from orchestrator.storage.redis import CoordinationStore

from support.approval_pipeline import env, paused, ran
from support.fleet_keys import install_fleet_key, signed_body
from support.redis_server import RedisServer

NAMESPACE = "orchestrator"  # the config's default: the test's Redis is its own


def queued_args(store: CoordinationStore) -> list[list[str]]:
    """The arguments of every task message waiting in the fleet's queue."""
    found = []
    for key in broker_keys(NAMESPACE).queues:
        raw = store.call(lambda client, key=key: client.lrange(key, 0, -1))
        found += [signed_body(m)[0] for m in raw]
    return found


def work(config: Path, store: CoordinationStore, args: list[str]) -> str:
    """What a worker whose DRY_RUN is false does with the task: its result's status."""
    ticket_id, ticket_file, ticket_dir, batch_id = args
    context = WorkerContext(config, None, env(DRY_RUN="false"), io.StringIO(), handoffs=MARKDOWN)
    result = run_claimed(context, store, ticket_id, ticket_file, ticket_dir, batch_id)
    return result.status


def test_a_ticket_in_the_tickets_dir_is_named_relative_to_it(tmp_path: Path) -> None:
    tickets = tmp_path / "tickets"
    assert located(tickets / "sub" / "T-1.md", tickets, from_sources=False) == (
        "sub/T-1.md",
        str(tickets.resolve()),
    )


@pytest.mark.slow
def test_approve_queues_the_run_to_the_fleet_and_a_worker_carries_it_out(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    config, run_id = paused(tmp_path)
    install_fleet_key(config.parent)  # the fleet signs what it queues (issue 40)
    fleet = env(ORCHESTRATOR_BROKER_URL=redis_server.url)  # DRY_RUN armed here
    out = io.StringIO()
    assert answer(config, None, run_id, approved=True, reason=None, out=out, environ=fleet) == 0
    said = out.getvalue()
    assert "queued to the fleet as task " in said and "not carried out here" not in said, said
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (1, 0)  # nothing ran here
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=NAMESPACE)
    try:
        [args] = queued_args(store)
        assert args[0] == "T-1"
        # A second hand-off while that task waits is the same task, not another.
        state = FileStorage(tmp_path / "state")
        record = state.runs.load(run_id)
        from orchestrator.batch.celery.requeue import requeue
        from orchestrator.domain.config import load_config

        again = requeue(
            load_config(config),
            state,
            "T-1",
            Path(record.ticket_snapshot),
            fleet,
            record.updated_at,
        )
        assert again.already and len(queued_args(store)) == 1
        assert work(config, store, args) == "completed"
    finally:
        store.close()
    assert FileStorage(tmp_path / "state").runs.load(run_id).state is RunState.COMPLETED
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)


@pytest.mark.slow
@pytest.mark.parametrize("here", [False, True], ids=["to-the-fleet", "here"])
def test_resume_records_the_resume_here_and_the_worker_drives_it(
    tmp_path: Path, redis_server: RedisServer, here: bool
) -> None:
    config, run_id = paused(tmp_path)
    install_fleet_key(config.parent)  # the fleet signs what it queues (issue 40)
    # Carried out here with DRY_RUN armed: stopped at the side-effectful stage.
    assert answer(config, None, run_id, approved=True, reason=None, out=io.StringIO(),
                  environ=env(), now=True) == 3  # fmt: skip
    record = FileStorage(tmp_path / "state").runs.load(run_id)
    assert record.halt is not None and record.halt.reason is HaltReason.DRY_RUN_BLOCK
    out = io.StringIO()
    fleet = env(ORCHESTRATOR_BROKER_URL=redis_server.url, DRY_RUN="false")
    code = resume(config, None, run_id, from_stage=None, by="alice", out=out, environ=fleet,
                  preflight=False, here=here)  # fmt: skip
    assert code == 0, out.getvalue()
    resumed = FileStorage(tmp_path / "state").runs.load(run_id)
    assert [r.by for r in resumed.resumes] == ["alice"]
    store = CoordinationStore(BrokerUrl(redis_server.url), namespace=NAMESPACE)
    try:
        if here:  # driven in this shell, as without a fleet: nothing queued
            assert "queued" not in out.getvalue() and queued_args(store) == []
            assert resumed.state is RunState.COMPLETED
        else:
            assert "queued to the fleet as task " in out.getvalue(), out.getvalue()
            assert ran(tmp_path, "publish") == 0  # recorded here, not driven here
            [args] = queued_args(store)
            assert work(config, store, args) == "completed"
    finally:
        store.close()
    assert ran(tmp_path, "publish") == 1
