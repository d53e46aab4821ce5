"""``orchestrator prune`` never deletes what a waiting or resumable run needs: a run
awaiting an answer and a ticket's latest run ``resume`` could go on with keep their clones
whatever their age, and ``--dry-run`` says which it kept and why. A clone freed anyway
(``--also-resumable``) makes ``resume`` refuse, naming ``--from-stage`` of the clone stage,
instead of failing in a missing directory. Real clones of a real origin, real stages."""

from __future__ import annotations

import io
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.app.resume import ResumeRefused, resume_run
from orchestrator.cli.commands.prune import prune
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.recovery.gateway import ScriptedGateway

from conftest import COUNTS, write_ticket
from support.harness import Harness, flaky, make_origin, reply, write_pipeline


def counted(name: str, extra: str = "") -> str:
    return (
        f'[[stages]]\nname = "{name}"\n{extra}writable = ["{COUNTS}"]\n'
        f'command = ["bash", "-c", "echo x >> {COUNTS}/count-{name}"]\n'
    )


def count(tmp_path: Path, name: str) -> int:
    path = tmp_path / "counts" / f"count-{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def later() -> datetime:
    return datetime.now(UTC) + timedelta(days=60)


def blocked(tmp_path: Path) -> tuple[Harness, RunRecord]:
    """A run through a real clone, stopped by DRY_RUN before its side-effectful stage."""
    make_origin(tmp_path)
    config = write_pipeline(
        tmp_path, counted("implement") + counted("publish", "side_effectful = true\n")
    )
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # DRY_RUN unset: armed
    h = Harness(config, ScriptedGateway([]), environ=environ)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.halt is not None and record.halt.reason is HaltReason.DRY_RUN_BLOCK
    return h, record


def resume(h: Harness, run_id: str, from_stage: str | None = None) -> RunRecord:
    services = replace(h.services, environ={**h.services.environ, "DRY_RUN": "false"})
    return resume_run(
        services, ledger_for(services.storage.runs.state_dir, {}), run_id,
        by="dana", from_stage=from_stage,
    )  # fmt: skip


@pytest.mark.quick
def test_a_run_awaiting_an_answer_keeps_its_clone_however_old(tmp_path: Path) -> None:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1), routing="")
    h = Harness(config, ScriptedGateway([reply({"action": "retry", "summary": "flaky"})]))
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.AWAITING_APPROVAL
    clone = Path(record.clone_dir)
    for dry_run in (True, False):
        out = io.StringIO()
        assert prune(tmp_path / "state", "30d", out, dry_run=dry_run, clock=later) == 0
        assert out.getvalue().splitlines()[0] == (
            f"kept {record.run_id}: awaiting approval; its clone is where the answer is "
            f"carried out (`orchestrator approve {record.run_id}` or `reject`)"
        )
        assert f"{'would free' if dry_run else 'freed'} 0 run(s)" in out.getvalue()
        assert "the clones of 1 run(s) still waiting" in out.getvalue()
    assert (clone / ".git").is_dir()
    # --also-resumable frees stopped runs only, never one still waiting.
    out = io.StringIO()
    prune(tmp_path / "state", "30d", out, dry_run=False, also_resumable=True, clock=later)
    assert f"kept {record.run_id}: awaiting approval" in out.getvalue()
    assert (clone / ".git").is_dir()


@pytest.mark.slow
def test_a_blocked_run_keeps_its_clone_and_resumes_after_prune(tmp_path: Path) -> None:
    h, record = blocked(tmp_path)
    out = io.StringIO()
    assert prune(tmp_path / "state", "30d", out, dry_run=True, clock=later) == 0
    assert (
        f"kept {record.run_id}: needs-human (dry_run_block) and resumable; "
        f"`orchestrator resume {record.run_id}` goes on in its clone\n"
    ) in out.getvalue()
    assert prune(tmp_path / "state", "30d", io.StringIO(), dry_run=False, clock=later) == 0
    assert (Path(record.clone_dir) / ".git").is_dir()

    done = resume(h, record.run_id)
    assert done.state is RunState.COMPLETED
    assert (count(tmp_path, "implement"), count(tmp_path, "publish")) == (1, 1)


@pytest.mark.slow
def test_a_run_no_longer_its_tickets_latest_is_pruned(tmp_path: Path) -> None:
    h, record = blocked(tmp_path)
    newer = h.run(Path(record.ticket_path))  # needs-human is terminal: a new run starts
    out = io.StringIO()
    assert prune(tmp_path / "state", "30d", out, dry_run=False, clock=later) == 0
    assert f"freed {record.run_id}: clone, logs" in out.getvalue()
    assert f"kept {newer.run_id}: needs-human (dry_run_block) and resumable" in out.getvalue()
    assert not Path(record.clone_dir).exists() and Path(newer.clone_dir).is_dir()


@pytest.mark.slow
def test_a_clone_freed_anyway_makes_resume_name_the_clone_stage(tmp_path: Path) -> None:
    h, record = blocked(tmp_path)
    out = io.StringIO()
    prune(tmp_path / "state", "30d", out, dry_run=False, also_resumable=True, clock=later)
    assert f"freed {record.run_id}: clone, logs" in out.getvalue()
    before = h.services.storage.runs.record_path(record.run_id).read_bytes()
    with pytest.raises(ResumeRefused) as refused:
        resume(h, record.run_id)
    assert str(refused.value) == (
        f"resume refused: run {record.run_id}'s clone {record.clone_dir} is gone (pruned, or "
        "removed), and stage 'publish' works in it; "
        f"`orchestrator resume {record.run_id} --from-stage clone` makes it again and runs "
        "every stage after 'clone' again"
    )
    # Nothing was recorded: the run is as it was.
    assert h.services.storage.runs.record_path(record.run_id).read_bytes() == before

    done = resume(h, record.run_id, from_stage="clone")
    assert done.state is RunState.COMPLETED
    assert (count(tmp_path, "implement"), count(tmp_path, "publish")) == (2, 1)
