"""Every kind of process a run starts records the signal that killed it (issue 41), in the
sandbox and with ``sandbox = "none"``: a command stage, a check (its result, and the
attempt it fails), an engine, and a recipe command (the recipe sandbox, built apart). All
four reach the runner through ``SandboxedExecutor`` (or the bare executor), so each is
one crash here — ``kill -SEGV $$`` — through the code that records it."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.app.services import Services
from orchestrator.domain.config import Config, LoadedConfig, parse_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord, StageRecord, StageStatus, new_run_id
from orchestrator.execution.attempts import run_stage
from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.recipes import recipe_executor, run_recipe

from support.gitrepo import commit_files, init_repo
from support.sandbox_required import require_sandbox
from support.services import make_services

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
MODES = ("sandbox", "none")
CRASH = '["sh", "-c", "kill -SEGV $$"]'
SEGV = int(signal.SIGSEGV)


def config(mode: str) -> Config:
    opt_out = 'sandbox = "none"' if mode == "none" else ""
    text = f"""
state_dir = "state"
{"[sandbox]" if mode == "none" else ""}
{'git = "none"' if mode == "none" else ""}

[engines.crasher]
command = {CRASH}

[[stages]]
name = "build"
command = {CRASH}
{opt_out}

[[stages]]
name = "implement"
engine = "crasher"
{opt_out}

[[stages]]
name = "review"

[[stages.checks]]
name = "lint"
command = {CRASH}
{opt_out}
"""
    return parse_config(text, Path("/nonexistent/config.toml"))


def record(root: Path) -> RunRecord:
    run_id = new_run_id("T-1", NOW)
    run_dir = root / "state" / "runs" / run_id
    rec = RunRecord(
        run_id=run_id, ticket_id="T-1", ticket_title="Ticket T-1", ticket_kind="bug-fix",
        ticket_path=str(root / "tickets" / "T-1.md"),
        ticket_snapshot=str(run_dir / "ticket" / "T-1.md"), ticket_sha256="0" * 64,
        repository=str(root / "origin.git"), base_branch="main",
        work_branch="orchestrator/T-1", config_path=str(root / "config.toml"),
        config_sha256="", run_dir=str(run_dir), clone_dir=str(run_dir / "clone"),
        created_at=NOW, updated_at=NOW, state=RunState.RUNNING,
        stages=tuple(
            StageRecord(name=name, status=StageStatus.PENDING)
            for name in ("build", "implement", "review")
        ),
    )  # fmt: skip
    repo = init_repo(Path(rec.clone_dir))
    commit_files(repo, {"README.md": "hi\n"}, "initial")
    Path(rec.ticket_snapshot).parent.mkdir(parents=True, exist_ok=True)
    Path(rec.ticket_snapshot).write_text(
        '+++\nid = "T-1"\ntitle = "Crash"\nkind = "bug-fix"\nrepository = "origin.git"\n+++\nx\n'
    )
    repo.git.update_ref("refs/remotes/origin/main", "HEAD")  # the engine starts from it
    return rec


def services(root: Path, cfg: Config) -> Services:
    return make_services(
        LoadedConfig(config=cfg, path=root / "config.toml", root=root, sha256=""),
        root / "state",
        environ={"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
                 "HOME": str(root)},
        executor=LocalExecutor(),
    )  # fmt: skip


def require(mode: str) -> None:
    if mode == "sandbox":
        require_sandbox()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stage", ["build", "implement"])
def test_a_command_stage_and_an_engine_killed_by_a_signal_record_it(
    mode: str, stage: str, tmp_path: Path
) -> None:
    require(mode)
    cfg = config(mode)
    svc = services(tmp_path, cfg)
    after, attempt = run_stage(record(tmp_path), cfg.stage(stage), svc)
    assert (attempt.exit_code, attempt.signal, attempt.timed_out) == (128 + SEGV, SEGV, False)
    assert after.attempts[-1].signal == SEGV
    # What is persisted says it too.
    saved = svc.storage.runs.load(after.run_id)
    assert saved.attempts[-1].signal == SEGV


@pytest.mark.parametrize("mode", MODES)
def test_a_check_killed_by_a_signal_records_it_and_so_does_the_attempt_it_fails(
    mode: str, tmp_path: Path
) -> None:
    require(mode)
    cfg = config(mode)
    svc = services(tmp_path, cfg)
    _, attempt = run_stage(record(tmp_path), cfg.stage("review"), svc)
    (check,) = attempt.checks
    assert (check.exit_code, check.signal, check.timed_out) == (128 + SEGV, SEGV, False)
    assert attempt.failing_check is not None and attempt.failing_check.signal == SEGV
    assert (attempt.exit_code, attempt.signal) == (128 + SEGV, SEGV)


@pytest.mark.parametrize("mode", MODES)
def test_a_recipe_command_killed_by_a_signal_records_it(mode: str, tmp_path: Path) -> None:
    require(mode)
    clone = Path(record(tmp_path).clone_dir)
    executor, refused = recipe_executor(
        LocalExecutor(), clone=clone, mode="none" if mode == "none" else "bwrap"
    )
    assert refused is None
    ran = run_recipe(
        (("sh", "-c", "kill -SEGV $$"),), executor=executor, clone=clone,
        env={"PATH": "/usr/bin:/bin"}, log_path=lambda i: tmp_path / f"recipe-{i}.log",
        timeout_s=30, kill_after_s=1, note=lambda _: None,
    )  # fmt: skip
    (command,) = ran.commands
    assert (command["exit_code"], command["signal"]) == (128 + SEGV, SEGV)
    assert ran.red_reason == f"recipe command 1 was killed by signal {SEGV} (exit {128 + SEGV})"
