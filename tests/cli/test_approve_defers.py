"""``orchestrator approve`` records the answer and leaves carrying it out to the next batch,
whose environment decides DRY_RUN: an approver whose shell has DRY_RUN armed (the default)
no longer strands the run at its side-effectful stage. ``--now`` carries it out in the
approver's shell, as before, and says that this shell's DRY_RUN decides. A reject ends the
run at once. Real stage processes; the batch and the answer in this process, the CLI in
its own."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from orchestrator.cli.commands.approve import answer
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage import FileStorage
from orchestrator.storage.approvals import os_user

from conftest import subprocess_env
from support.approval_pipeline import env, paused, ran, run_batch
from support.scripted_cli import run_forked


def state(tmp_path: Path, run_id: str) -> RunState:
    return FileStorage(tmp_path / "state").runs.load(run_id).state


def no_model() -> ScriptedGateway:
    return ScriptedGateway([])  # a model call now would fail the test


@pytest.mark.quick
def test_approve_leaves_the_run_to_the_next_batch_whose_dry_run_decides(tmp_path: Path) -> None:
    config, run_id = paused(tmp_path)
    out = io.StringIO()
    # The approver's shell: DRY_RUN unset, armed.
    code = answer(config, None, run_id, approved=True, reason=None, out=out, environ=env())
    assert code == 0
    assert out.getvalue() == (
        f"approved: verdict 1 of {run_id} (retry, routed hitl_recommended at confidence "
        f"{confidence(tmp_path, run_id)}) by {os_user()}\n"
        "not carried out here: the next `orchestrator batch` carries it out; its environment "
        "decides DRY_RUN and the tools; to carry it out now, in this shell: "
        f"`orchestrator resume {run_id}`\n"
    )
    # Nothing ran in the approver's shell.
    assert state(tmp_path, run_id) is RunState.AWAITING_APPROVAL
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (1, 0)

    # The next batch, whose environment has DRY_RUN=false: the retry and the PR stage run.
    [line] = run_batch(config, no_model(), DRY_RUN="false")
    assert " completed " in line and run_id in line
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)
    record = FileStorage(tmp_path / "state").runs.load(run_id)
    assert [a.stage for a in record.attempts] == ["clone", "build", "build", "publish"]
    # Carried out once.
    [line] = run_batch(config, no_model(), DRY_RUN="false")
    assert " already-completed " in line
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)


def confidence(tmp_path: Path, run_id: str) -> float:
    verdict = FileStorage(tmp_path / "state").runs.verdict_path(run_id, 1)
    return float(json.loads(verdict.read_text())["proposal"]["confidence"])


def test_an_answer_recorded_is_not_given_twice(tmp_path: Path) -> None:
    config, run_id = paused(tmp_path)
    answer(config, None, run_id, approved=True, reason=None, out=io.StringIO(), environ=env())
    with pytest.raises(
        UsageError,
        match=rf"run {run_id}: verdict 1 is already answered \(approved by {os_user()}\); the "
        rf"next batch carries it out, or `orchestrator resume {run_id}` now",
    ):
        answer(config, None, run_id, approved=False, reason="no", out=io.StringIO(), environ=env())
    assert state(tmp_path, run_id) is RunState.AWAITING_APPROVAL


def test_approve_now_carries_it_out_here_and_names_this_shells_dry_run(tmp_path: Path) -> None:
    config, run_id = paused(tmp_path)
    out = io.StringIO()
    code = answer(
        config, None, run_id, approved=True, reason=None, out=out, environ=env(), now=True
    )
    # As before: the approver's armed DRY_RUN stops the run at its side-effectful stage...
    assert code == 3
    assert (
        "carrying it out here (--now): this shell's environment decides DRY_RUN "
        "(DRY_RUN is armed here) and the tools\n"
    ) in out.getvalue()
    record = FileStorage(tmp_path / "state").runs.load(run_id)
    assert record.state is RunState.NEEDS_HUMAN and record.halt is not None
    assert record.halt.reason is HaltReason.DRY_RUN_BLOCK
    assert f"`DRY_RUN=false orchestrator resume {run_id}`" in record.halt.detail
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 0)
    # ...but it is no longer stranded: the next DRY_RUN=false batch opens the PR, once.
    [line] = run_batch(config, no_model(), DRY_RUN="false")
    assert " completed " in line
    [line] = run_batch(config, no_model(), DRY_RUN="false")
    assert " already-completed " in line
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)


def test_reject_still_ends_the_run_at_once(tmp_path: Path) -> None:
    config, run_id = paused(tmp_path)
    out = io.StringIO()
    code = answer(config, None, run_id, approved=False, reason="a real bug", out=out, environ=env())
    assert code == 3
    record = FileStorage(tmp_path / "state").runs.load(run_id)
    assert record.state is RunState.NEEDS_HUMAN and record.halt is not None
    assert record.halt.reason is HaltReason.HUMAN_REJECTED
    assert "not carried out here" not in out.getvalue()
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (1, 0)


@pytest.mark.slow
def test_the_cli_approves_and_resume_carries_the_answer_out_at_once(tmp_path: Path) -> None:
    config, run_id = paused(tmp_path)
    # Each command in its own process, forked from this one (``run_forked``).
    approved = run_forked(
        Path.cwd(), ["--config", str(config), "approve", run_id], subprocess_env(),
        timeout_s=120, as_entry=True,
    )  # fmt: skip
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert f"to carry it out now, in this shell: `orchestrator resume {run_id}`" in (
        approved.stdout
    )
    assert state(tmp_path, run_id) is RunState.AWAITING_APPROVAL
    resumed = run_forked(
        Path.cwd(), ["--config", str(config), "resume", run_id, "--no-preflight"],
        subprocess_env(DRY_RUN="false"), timeout_s=120, as_entry=True,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert state(tmp_path, run_id) is RunState.COMPLETED
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)


def test_on_a_fleet_the_answered_run_is_queued_and_the_worker_carries_it_out(
    tmp_path: Path,
) -> None:
    from orchestrator.batch.celery.backend import settled as _settled
    from orchestrator.batch.queue import WORKER_ENVIRONMENT, run_one
    from orchestrator.cli.console import terminal_services
    from orchestrator.domain.config import load_config

    config, run_id = paused(tmp_path)
    answer(config, None, run_id, approved=True, reason=None, out=io.StringIO(), environ=env())
    loaded = load_config(config)
    ticket = tmp_path / "tickets" / "T-1.md"
    # The celery batch queues it (an answered run is not finished)...
    assert _settled(ticket, terminal_services(loaded, None, io.StringIO(), env()), {}) == "T-1"
    # ...and the worker that takes it carries the answer out in its own environment.
    worker = terminal_services(loaded, None, io.StringIO(), env(DRY_RUN="false"))
    result = run_one(ticket, worker, decides=WORKER_ENVIRONMENT)
    assert (result.status, result.run_id, result.ran) == ("completed", run_id, True)
    assert (ran(tmp_path, "build"), ran(tmp_path, "publish")) == (2, 1)
