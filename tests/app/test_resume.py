"""``orchestrator resume``: a stopped run goes on from the stage that stopped it once a
person fixed the cause, without running (or paying for) the finished stages again; the
resume is recorded on the run and in the ledger; what may not be resumed is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.domain.errors import IllegalTransition
from orchestrator.domain.lifecycle import (
    RESUMES,
    HaltReason,
    RunState,
    check_resume,
)
from orchestrator.domain.runs import RunRecord
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.files import FileStorage
from orchestrator.storage.runs import RunStore

from conftest import COUNTS, subprocess_env, write_ticket
from support.cli_here import cli_here
from support.harness import Harness, make_origin, write_pipeline


def counted(name: str, extra: str = "") -> str:
    return (
        f'[[stages]]\nname = "{name}"\n{extra}writable = ["{COUNTS}"]\n'
        f'command = ["bash", "-c", "echo x >> {COUNTS}/count-{name}"]\n'
    )


PIPELINE = counted("implement") + counted("publish", "side_effectful = true\n")


def count(tmp_path: Path, name: str) -> int:
    path = tmp_path / "counts" / f"count-{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def blocked_run(tmp_path: Path, pipeline: str = PIPELINE) -> tuple[Harness, RunRecord]:
    """A run stopped by the armed DRY_RUN gate before its side-effectful stage."""
    make_origin(tmp_path)
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # DRY_RUN unset: armed
    h = Harness(write_pipeline(tmp_path, pipeline), ScriptedGateway([]), environ=environ)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.DRY_RUN_BLOCK
    assert f"`DRY_RUN=false orchestrator resume {record.run_id}`" in record.halt.detail
    assert "the next `DRY_RUN=false orchestrator batch` continues it" in record.halt.detail
    assert (count(tmp_path, "implement"), count(tmp_path, "publish")) == (1, 0)
    return h, record


def resume_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``orchestrator resume`` in this process (``support.cli_here``), as dana."""
    argv = ["--config", str(tmp_path / "config.toml"), "resume", *args]
    return cli_here(argv, subprocess_env(USER="dana", **env))


@pytest.mark.slow
def test_a_dry_run_block_resumed_with_dry_run_false_runs_only_what_was_blocked(
    tmp_path: Path,
) -> None:
    _, record = blocked_run(tmp_path)
    clone_head = (Path(record.clone_dir) / ".git" / "HEAD").stat().st_mtime_ns
    proc = resume_cli(tmp_path, record.run_id, DRY_RUN="false")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resumed by dana at stage 'publish'" in proc.stdout
    done = RunStore(tmp_path / "state").load(record.run_id)
    assert done.state is RunState.COMPLETED
    # Only the blocked stage ran: no second clone, no second implement.
    assert (count(tmp_path, "implement"), count(tmp_path, "publish")) == (1, 1)
    assert [a.stage for a in done.attempts] == ["clone", "implement", "publish"]
    assert (Path(record.clone_dir) / ".git" / "HEAD").stat().st_mtime_ns == clone_head
    [entry] = done.resumes
    assert (entry.by, entry.from_state, entry.stage) == ("dana", RunState.NEEDS_HUMAN, "publish")
    assert entry.halt is not None and entry.halt.reason is HaltReason.DRY_RUN_BLOCK
    ledger = ledger_for(tmp_path / "state", {})
    [row] = [r for r in ledger.rows() if r["capability"] == "resume-run"]
    assert (row["source"], row["run"], row["decision_id"]) == (
        "human", record.run_id, f"{record.run_id}:resume-1",
    )  # fmt: skip
    assert row["decision"] == {
        "action": "resume-run", "by": "dana", "from_state": "needs-human",
        "halt": "dry_run_block", "stage": "publish",
    }  # fmt: skip
    assert ledger.verify().ok
    shown = cli_here(
        ["--config", str(tmp_path / "config.toml"), "show", record.run_id], subprocess_env()
    )
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("resumed ")]
    assert line.endswith("by dana from needs-human (dry_run_block), at stage publish"), line


@pytest.mark.slow
def test_resuming_while_dry_run_is_still_armed_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    _, record = blocked_run(tmp_path)
    before = (tmp_path / "state" / "runs" / f"{record.run_id}.json").read_bytes()
    proc = resume_cli(tmp_path, record.run_id, DRY_RUN="0")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"resume refused: run {record.run_id} stopped because DRY_RUN")
    assert (tmp_path / "state" / "runs" / f"{record.run_id}.json").read_bytes() == before
    assert not (tmp_path / "state" / "ledger.jsonl").exists()


@pytest.mark.slow
def test_from_an_earlier_stage_reruns_it_and_everything_after_keeping_what_came_before(
    tmp_path: Path,
) -> None:
    _, record = blocked_run(tmp_path)
    proc = resume_cli(
        tmp_path, record.ticket_id, "--from-stage", "implement", "--by", "erin", DRY_RUN="false"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = RunStore(tmp_path / "state").load(record.run_id)
    assert done.state is RunState.COMPLETED
    assert [a.stage for a in done.attempts] == ["clone", "implement", "implement", "publish"]
    assert done.resumes[0].by == "erin" and done.resumes[0].stage == "implement"


@pytest.mark.slow
def test_a_later_stage_is_refused_while_an_earlier_one_has_not_completed(tmp_path: Path) -> None:
    pipeline = (
        counted("implement") + counted("lint") + counted("publish", "side_effectful = true\n")
    )
    _, record = blocked_run(tmp_path, pipeline)
    # Put lint back to pending, as if it had not run: skipping it is not a resume.
    store = RunStore(tmp_path / "state")
    store.save(store.load(record.run_id).reset_stages_from("lint"))
    proc = resume_cli(tmp_path, record.run_id, "--from-stage", "publish", DRY_RUN="false")
    assert proc.returncode == 2
    assert "stage 'lint' comes before 'publish' and has not completed" in proc.stderr
    proc = resume_cli(tmp_path, record.run_id, "--from-stage", "nope", DRY_RUN="false")
    assert proc.returncode == 2
    assert "has no stage 'nope' (its stages: clone, implement, lint, publish)" in proc.stderr


@pytest.mark.slow
def test_a_failed_run_resumes_at_the_failed_stage_once_the_program_is_installed(
    tmp_path: Path,
) -> None:
    make_origin(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The sandbox shows the system's directories only: a tool installed elsewhere is
    # declared readable, as a user would declare it.
    pipeline = counted("prepare") + (
        f'[[stages]]\nname = "lint"\ncommand = ["fancy-lint"]\nreadable = ["{bin_dir}"]\n'
    )
    environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "DRY_RUN": "false"}
    h = Harness(write_pipeline(tmp_path, pipeline), ScriptedGateway([]), environ=environ)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CONFIG_ERROR
    lint = bin_dir / "fancy-lint"
    lint.write_text("#!/bin/sh\necho linted\n")
    lint.chmod(0o755)
    proc = resume_cli(tmp_path, record.run_id, PATH=environ["PATH"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = RunStore(tmp_path / "state").load(record.run_id)
    assert done.state is RunState.COMPLETED
    assert [a.stage for a in done.attempts] == ["clone", "prepare", "lint", "lint"]
    assert count(tmp_path, "prepare") == 1
    assert done.resumes[0].from_state is RunState.FAILED


@pytest.mark.slow
def test_a_completed_run_is_not_resumed(tmp_path: Path) -> None:
    _, record = blocked_run(tmp_path)
    assert resume_cli(tmp_path, record.run_id, DRY_RUN="false").returncode == 0
    proc = resume_cli(tmp_path, record.run_id, DRY_RUN="false")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"resume refused: run {record.run_id}: a completed run cannot be resumed: it completed\n"
    )


@pytest.mark.slow
def test_a_ticket_being_run_is_refused_clearly(tmp_path: Path) -> None:
    _, record = blocked_run(tmp_path)
    with FileStorage(tmp_path / "state").locks.ticket(record.ticket_id):
        proc = resume_cli(tmp_path, record.run_id, DRY_RUN="false")
    assert proc.returncode == 75
    assert proc.stderr.startswith(f"resume refused: {record.ticket_id} is being run by pid ")
    assert RunStore(tmp_path / "state").load(record.run_id).resumes == ()


@pytest.mark.slow
def test_only_the_tickets_latest_run_is_resumed(tmp_path: Path) -> None:
    h, record = blocked_run(tmp_path)
    newer = h.run(Path(record.ticket_path))  # needs-human is terminal: a new run starts
    assert newer.run_id != record.run_id
    proc = resume_cli(tmp_path, record.run_id, DRY_RUN="false")
    assert proc.returncode == 2
    assert f"is not T-1's latest run ({newer.run_id} is)" in proc.stderr


# --- the state machine ---------------------------------------------------------------------


def test_resume_is_an_explicit_frozen_table_of_its_own() -> None:
    assert dict(RESUMES) == {
        RunState.NEEDS_HUMAN: frozenset({RunState.RUNNING}),
        RunState.FAILED: frozenset({RunState.RUNNING}),
    }
    with pytest.raises(TypeError):
        RESUMES[RunState.COMPLETED] = frozenset({RunState.RUNNING})  # type: ignore[index]


@pytest.mark.parametrize(
    ("state", "halt", "refused"),
    [
        (RunState.NEEDS_HUMAN, HaltReason.DRY_RUN_BLOCK, None),
        (RunState.FAILED, HaltReason.CAP_EXHAUSTED, None),
        (RunState.FAILED, HaltReason.CONFIG_ERROR, None),
        (RunState.NEEDS_HUMAN, HaltReason.HUMAN_REJECTED, "a person rejected its proposal"),
        (RunState.COMPLETED, None, "it completed"),
        (RunState.SPLIT, None, "its work went to sub-tickets"),
        (RunState.RUNNING, None, "it has not stopped"),
    ],
)
def test_which_stopped_runs_may_be_resumed(
    state: RunState, halt: HaltReason | None, refused: str | None
) -> None:
    if refused is None:
        check_resume(state, halt)
    else:
        with pytest.raises(IllegalTransition, match=refused):
            check_resume(state, halt)


@pytest.mark.slow
def test_a_run_whose_config_changed_is_refused_before_anything_is_recorded(
    tmp_path: Path,
) -> None:
    _, record = blocked_run(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text(config.read_text() + counted("extra"))
    proc = resume_cli(tmp_path, record.run_id, DRY_RUN="false")
    assert proc.returncode == 2
    assert "was started with stages ['clone', 'implement', 'publish']" in proc.stderr
    assert RunStore(tmp_path / "state").load(record.run_id).state is RunState.NEEDS_HUMAN
    assert not (tmp_path / "state" / "ledger.jsonl").exists()
