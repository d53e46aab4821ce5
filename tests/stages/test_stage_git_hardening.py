"""The stage programs work in a clone someone else wrote: they run none of its hooks or
its fsmonitor, refuse a config that redirects or reaches out, refuse a ``.git`` that is not
the clone's own, and open-pr records a pull request only for a push it saw land. Each
attack has a canary outside the clone that the planted program would create."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import git
import pytest
from test_stage_scripts import branch_subjects, ok, run_stage, snapshot

from orchestrator.demo.run import DemoLayout, build_demo
from orchestrator.execution.stage_env import StageContext, stage_environ

from conftest import subprocess_env
from support.gitrepo import bare_clone

WORK = "orch/CARDS-2"
# Every hook git could run for what the stages do: commit, am, checkout, push, gc.
HOOKS = (
    "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "applypatch-msg",
    "pre-applypatch", "post-applypatch", "post-checkout", "post-merge", "post-rewrite",
    "pre-push", "reference-transaction", "pre-auto-gc", "post-index-change",
)  # fmt: skip


@pytest.fixture
def layout(tmp_path: Path) -> DemoLayout:
    return build_demo(tmp_path / "demo")


@pytest.fixture
def ctx(layout: DemoLayout, tmp_path: Path) -> StageContext:
    run_dir = tmp_path / "runs" / "r1"
    return StageContext(
        ticket_file=snapshot(layout, "CARDS-2", run_dir), ticket_id="CARDS-2",
        ticket_kind="bug-fix", repository=str(layout.origin), base_branch="main",
        run_id="r1", run_dir=run_dir, clone_dir=run_dir / "clone",
        state_dir=tmp_path / "state", stage="clone", engine="", model="", attempt=1,
    )  # fmt: skip


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return tmp_path / "CANARY"


def plant_programs(clone: Path, canary: Path) -> None:
    """Every hook, and an fsmonitor: each touches the canary."""
    script = canary.with_name("touch-canary.sh")
    script.write_text(f"#!/bin/sh\ntouch '{canary}'\n")
    script.chmod(0o755)
    hooks = clone / ".git" / "hooks"
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\ntouch '{canary}'\n")
        (hooks / name).chmod(0o755)
    with git.Repo(clone) as repo:
        repo.git.config("core.fsmonitor", str(script))


def cloned_and_implemented(ctx: StageContext, tmp_path: Path) -> None:
    ok(run_stage("clone.py", ctx, tmp_path))
    ok(run_stage("implement_patch.py", ctx, tmp_path))


def origin_branch(origin: Path) -> str | None:
    with git.Repo(origin) as repo:
        return repo.heads[WORK].commit.hexsha if WORK in repo.heads else None


def clone_head(ctx: StageContext) -> str:
    with git.Repo(ctx.clone_dir) as repo:
        return repo.head.commit.hexsha


# ---- hooks and fsmonitor -------------------------------------------------------------


@pytest.mark.slow
def test_the_patch_engine_runs_no_hook_and_no_fsmonitor(
    ctx: StageContext, tmp_path: Path, canary: Path
) -> None:
    ok(run_stage("clone.py", ctx, tmp_path))
    plant_programs(ctx.clone_dir, canary)
    ok(run_stage("implement_patch.py", ctx, tmp_path))
    assert not canary.exists(), "the patch engine ran a program the clone named"
    assert len(branch_subjects(ctx.clone_dir)) == 2


@pytest.mark.slow
def test_the_commit_order_check_runs_no_hook_and_no_fsmonitor(
    ctx: StageContext, tmp_path: Path, canary: Path
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    plant_programs(ctx.clone_dir, canary)
    out = ok(run_stage("checks.commit_order.py", ctx, tmp_path))
    assert not canary.exists(), "the check ran a program the clone named"
    assert out == "lint-bug-commit-order: OK (2 commits)\n"


@pytest.mark.slow
def test_open_pr_runs_no_hook_and_no_fsmonitor(
    ctx: StageContext, tmp_path: Path, canary: Path, layout: DemoLayout
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    plant_programs(ctx.clone_dir, canary)
    ok(run_stage("open_pr_local.py", ctx, tmp_path))
    assert not canary.exists(), "open-pr ran a program the clone named"
    assert origin_branch(layout.origin) == clone_head(ctx)


# ---- a config that reaches out ----------------------------------------------------------


@pytest.mark.slow
def test_the_commit_order_check_fetches_nothing_from_a_planted_promisor(
    ctx: StageContext, tmp_path: Path, canary: Path
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    with git.Repo(ctx.clone_dir) as repo:
        tree = repo.head.commit.tree.hexsha  # made by `git am`: a loose object
        for key, value in {
            "core.repositoryformatversion": "1", "extensions.partialClone": "origin",
            "remote.origin.url": f"ext::sh -c touch% {canary}", "remote.origin.promisor": "true",
            "protocol.ext.allow": "always",
        }.items():  # fmt: skip
            repo.git.config(key, value)
    (ctx.clone_dir / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    result = run_stage("checks.commit_order.py", ctx, tmp_path)
    assert not canary.exists(), "a lazy fetch ran the clone's ext:: command"
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"lint-bug-commit-order: refusing to work in {ctx.clone_dir}: the clone's own git "
        "config sets what only an attacker would: remote.origin.promisor ("
    )
    assert "; extensions.partialclone (" in result.stderr


# Each as (key, value, the key as git lists it): pushed to "origin", the branch would go
# to the evil repository.
REDIRECTS = {
    "pushurl": lambda origin, evil: ("remote.origin.pushurl", evil, "remote.origin.pushurl"),
    "insteadOf": lambda origin, evil: (f"url.{evil}.insteadOf", origin, f"url.{evil}.insteadof"),
}


@pytest.mark.slow
@pytest.mark.parametrize("redirect", REDIRECTS)
def test_open_pr_is_never_redirected(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout, redirect: str
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    evil = bare_clone(layout.origin, tmp_path / "evil.git")
    key, value, listed = REDIRECTS[redirect](str(layout.origin), str(evil))
    with git.Repo(ctx.clone_dir) as repo:
        repo.git.config(key, value)
    result = run_stage("open_pr_local.py", ctx, tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"open-pr: refusing to work in {ctx.clone_dir}: the clone's own git config sets what "
        f"only an attacker would: {listed} ("
    )
    assert origin_branch(evil) is None and origin_branch(layout.origin) is None
    assert not (ctx.run_dir / "pull-request.json").exists()


@pytest.mark.slow
def test_open_pr_records_nothing_when_the_push_did_not_land(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    # The repository takes the push, then puts the branch back where main is.
    hook = layout.origin / "hooks" / "post-receive"
    hook.write_text('#!/bin/sh\nwhile read old new ref; do git update-ref "$ref" main; done\n')
    hook.chmod(0o755)
    result = run_stage("open_pr_local.py", ctx, tmp_path)
    head = clone_head(ctx)
    with git.Repo(layout.origin) as origin:
        main = origin.heads.main.commit.hexsha
    assert result.returncode == 1
    assert result.stderr == (
        f"open-pr: pushed {WORK} ({head[:7]}), but {layout.origin} does not have it: it is "
        f"at {main[:7]}; the push went somewhere else\n"
    )
    assert not (ctx.run_dir / "pull-request.json").exists()


@pytest.mark.slow
def test_the_github_stage_opens_nothing_when_the_push_did_not_land(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from orchestrator.stages import open_pr_github

    cloned_and_implemented(ctx, tmp_path)
    hook = layout.origin / "hooks" / "post-receive"
    hook.write_text('#!/bin/sh\nwhile read old new ref; do git update-ref "$ref" main; done\n')
    hook.chmod(0o755)
    environ = stage_environ({"PATH": "/usr/bin:/bin"}, replace(ctx, stage="open-pr"))
    environ.update(
        GITHUB_TOKEN="ghp_" + "x" * 36, ORCHESTRATOR_GITHUB_REPO="octo/cards",
        ORCHESTRATOR_GITHUB_PUSH_URL=str(layout.origin),
    )  # fmt: skip
    monkeypatch.chdir(ctx.clone_dir)

    def no_api(api_url: str) -> object:
        pytest.fail("the pull request was opened for a push that did not land")

    assert open_pr_github.main(environ, no_api) == 1  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert err.startswith(f"open-pr: pushed {WORK} (") and "does not have it" in err
    assert not (ctx.run_dir / "pull-request.json").exists()


# ---- a .git that is not the clone's -----------------------------------------------------


@pytest.mark.slow
def test_open_pr_refuses_a_git_file_that_points_at_another_repository(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    other = tmp_path / "other"
    (ctx.clone_dir / ".git").rename(other)
    (ctx.clone_dir / ".git").write_text(f"gitdir: {other}\n")
    result = run_stage("open_pr_local.py", ctx, tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"open-pr: refusing to work in {ctx.clone_dir}: {ctx.clone_dir / '.git'} is a file "
        "(a gitdir: link to another repository), not a directory\n"
    )
    assert origin_branch(layout.origin) is None
    assert not (ctx.run_dir / "pull-request.json").exists()


@pytest.mark.slow
def test_the_clone_stage_refuses_a_transport_that_runs_a_command(
    ctx: StageContext, tmp_path: Path, canary: Path
) -> None:
    result = run_stage("clone.py", replace(ctx, repository=f"ext::sh -c touch% {canary}"), tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"clone: cannot clone ext::sh -c touch% {canary}: not an absolute path, nor a file, "
        "git, http(s) or ssh URL\n"
    )
    assert not canary.exists() and not ctx.clone_dir.exists()


@pytest.mark.slow
def test_the_work_branch_is_pushed_to_the_repository_by_its_url(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout
) -> None:
    cloned_and_implemented(ctx, tmp_path)
    # Whatever the clone calls origin, the ticket's repository is where the branch goes.
    with git.Repo(ctx.clone_dir) as repo:
        repo.git.remote("set-url", "origin", str(tmp_path / "nowhere.git"))
    ok(run_stage("open_pr_local.py", ctx, tmp_path))
    assert origin_branch(layout.origin) == clone_head(ctx)
    record = json.loads((ctx.run_dir / "pull-request.json").read_text())
    assert record["head_sha"] == clone_head(ctx)


def test_a_stage_program_imports_no_runner(tmp_path: Path) -> None:
    # The stages import the hardening from orchestrator.execution.git, which must stay
    # light: no runner, no pydantic, at a stage's start-up.
    probe = (
        "import sys, orchestrator.stages.checks.commit_order; "
        "print(sorted(m for m in sys.modules if m.startswith(('orchestrator.execution.r', "
        "'pydantic'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "[]\n"), result.stderr
