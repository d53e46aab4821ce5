"""The default stage scripts, run as real processes with the ORCH_* contract."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import git
import pytest

from orchestrator.demo.run import DemoLayout, build_demo
from orchestrator.execution.stage_env import StageContext, stage_environ

from conftest import subprocess_env
from support.gitrepo import clone


@pytest.fixture
def layout(tmp_path: Path) -> DemoLayout:
    # Per test, not shared: open-pr pushes into the origin, and tests must not see that.
    return build_demo(tmp_path / "demo")


def snapshot(layout: DemoLayout, ticket_id: str, run_dir: Path) -> Path:
    """What the orchestrator hands a stage: a copy of the ticket with its extras beside it."""
    source = layout.tickets[ticket_id]
    dest = run_dir / "ticket"
    dest.mkdir(parents=True)
    for path in (source, source.with_suffix(".patch")):
        shutil.copy(path, dest / path.name)
    return dest / source.name


@pytest.fixture
def ctx(layout: DemoLayout, tmp_path: Path) -> StageContext:
    run_dir = tmp_path / "runs" / "r1"
    return StageContext(
        ticket_file=snapshot(layout, "CARDS-2", run_dir),
        ticket_id="CARDS-2",
        ticket_kind="bug-fix",
        repository=str(layout.origin),
        base_branch="main",
        run_id="r1",
        run_dir=run_dir,
        clone_dir=run_dir / "clone",
        state_dir=tmp_path / "state",
        stage="clone",
        engine="",
        model="",
        attempt=1,
    )


def run_stage(script: str, ctx: StageContext, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = stage_environ(subprocess_env(), ctx)
    # A machine with no git identity anywhere: the clone stage must make commits possible.
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    cwd = ctx.run_dir if script == "clone.py" else ctx.clone_dir
    return subprocess.run(
        [sys.executable, "-P", "-m", f"orchestrator.stages.{script.removesuffix('.py')}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def branch_subjects(clone_dir: Path) -> list[str]:
    repo = git.Repo(clone_dir)
    return [str(c.summary) for c in repo.iter_commits("origin/main..HEAD", reverse=True)]


def test_clone_creates_the_work_branch(ctx: StageContext, tmp_path: Path) -> None:
    out = ok(run_stage("clone.py", ctx, tmp_path))
    repo = git.Repo(ctx.clone_dir)
    assert repo.active_branch.name == "orch/CARDS-2"
    assert repo.head.commit == repo.commit("origin/main")
    assert repo.active_branch.tracking_branch() is None
    assert repo.config_reader("repository").get_value("user", "name") == "orchestrator"
    assert "on new branch orch/CARDS-2 from origin/main" in out


def test_clone_sets_no_identity_the_users_global_config_gives(
    ctx: StageContext, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".gitconfig").write_text("[user]\n\tname = Ada\n\temail = ada@x\n")
    out = ok(run_stage("clone.py", ctx, tmp_path))
    assert "no git identity configured" not in out
    assert "user" not in git.Repo(ctx.clone_dir).config_reader("repository").sections()


@pytest.mark.slow
def test_clone_replaces_a_leftover_clone(ctx: StageContext, tmp_path: Path) -> None:
    ctx.clone_dir.mkdir()
    (ctx.clone_dir / "half-written").write_text("from an interrupted attempt")
    out = ok(run_stage("clone.py", ctx, tmp_path))
    assert not (ctx.clone_dir / "half-written").exists()
    assert "removed the clone left by an earlier attempt" in out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("repository", "base_branch", "message"),
    [
        (
            "/nonexistent/nope.git",
            "main",
            (
                "clone: cannot clone /nonexistent/nope.git: "
                "fatal: repository '/nonexistent/nope.git' does not exist\n"
            ),
        ),
        ("", "develop", "clone: base branch 'develop' does not exist in "),
    ],
)
def test_clone_errors_are_one_line(
    ctx: StageContext, tmp_path: Path, repository: str, base_branch: str, message: str
) -> None:
    broken = replace(ctx, repository=repository or ctx.repository, base_branch=base_branch)
    result = run_stage("clone.py", broken, tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr


def test_clone_on_a_machine_without_git_says_so_in_one_line(
    ctx: StageContext, tmp_path: Path
) -> None:
    env = stage_environ(subprocess_env(), ctx)
    env["PATH"] = str(tmp_path / "no-git-here")  # the stage starts git by name, from PATH
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator.stages.clone"],
        cwd=ctx.run_dir, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(f"clone: cannot clone {ctx.repository}: ")
    assert "No such file or directory: 'git'" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_implement_applies_the_series_and_is_idempotent(ctx: StageContext, tmp_path: Path) -> None:
    ok(run_stage("clone.py", ctx, tmp_path))
    out = ok(run_stage("implement_patch.py", ctx, tmp_path))
    expected = [
        "Count an ace as 1 when 11 would bust the hand",
        "Add tests pinning soft-ace hand values",
    ]
    assert branch_subjects(ctx.clone_dir) == expected
    assert "2 commit(s) on orch/CARDS-2:" in out
    (ctx.clone_dir / "scratch.txt").write_text("left by the first attempt")
    ok(run_stage("implement_patch.py", ctx, tmp_path))
    assert branch_subjects(ctx.clone_dir) == expected
    assert not (ctx.clone_dir / "scratch.txt").exists()
    head = git.Repo(ctx.clone_dir).head.commit
    assert (head.author.name, head.committer.name) == ("Dana Dealer", "orchestrator")


@pytest.mark.slow
def test_implement_applies_a_plain_diff_as_one_commit(
    ctx: StageContext, tmp_path: Path, layout: DemoLayout
) -> None:
    scratch = clone(layout.origin, tmp_path / "scratch")
    (Path(scratch.working_dir) / "README.md").write_text("# cards\n\nNow documented.\n")
    diff = scratch.git.diff(strip_newline_in_stdout=False)
    ctx.ticket_file.with_suffix(".patch").write_text(diff)
    ok(run_stage("clone.py", ctx, tmp_path))
    ok(run_stage("implement_patch.py", ctx, tmp_path))
    assert branch_subjects(ctx.clone_dir) == ["hand_value() never counts an ace as 1"]
    assert (ctx.clone_dir / "README.md").read_text() == "# cards\n\nNow documented.\n"


@pytest.mark.slow
def test_implement_fails_cleanly_when_the_patch_does_not_apply(
    ctx: StageContext, tmp_path: Path
) -> None:
    patch = ctx.ticket_file.with_suffix(".patch")
    patch.write_text(patch.read_text().replace("return sum(card_value", "return max(card_value"))
    ok(run_stage("clone.py", ctx, tmp_path))
    result = run_stage("implement_patch.py", ctx, tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("implement: CARDS-2.patch does not apply: ")
    assert "cards/hand.py" in result.stderr
    assert "Traceback" not in result.stderr
    repo = git.Repo(ctx.clone_dir)
    assert not Path(repo.git_dir, "rebase-apply").exists()  # no am session left behind
    assert branch_subjects(ctx.clone_dir) == []
    assert not repo.is_dirty(untracked_files=True)


@pytest.mark.slow
def test_open_pr_pushes_and_records(ctx: StageContext, tmp_path: Path) -> None:
    ok(run_stage("clone.py", ctx, tmp_path))
    ok(run_stage("implement_patch.py", ctx, tmp_path))
    out = ok(run_stage("open_pr_local.py", ctx, tmp_path))
    record_path = ctx.run_dir / "pull-request.json"
    assert out.splitlines()[-1] == f"pull request recorded: {record_path}"

    head = git.Repo(ctx.clone_dir).head.commit.hexsha
    assert git.Repo(ctx.repository).commit("orch/CARDS-2").hexsha == head
    record = json.loads(record_path.read_text())
    assert set(record) == {
        "forge",
        "repository",
        "head",
        "base",
        "head_sha",
        "title",
        "body",
        "commits",
        "created_at",
    }
    assert record["forge"] == "local"
    assert record["repository"] == ctx.repository
    assert (record["head"], record["base"], record["head_sha"]) == ("orch/CARDS-2", "main", head)
    assert record["title"] == "hand_value() never counts an ace as 1"
    assert record["body"].startswith("`hand_value` counts every ace as 11")
    assert [c["subject"] for c in record["commits"]] == branch_subjects(ctx.clone_dir)
    assert record["commits"][-1]["sha"] == head
    assert record["created_at"].endswith("+00:00")

    first = record_path.read_bytes()
    ok(run_stage("open_pr_local.py", ctx, tmp_path))
    assert record_path.read_bytes() == first  # same head: the same record


@pytest.mark.slow
def test_open_pr_refuses_an_empty_branch(ctx: StageContext, tmp_path: Path) -> None:
    ok(run_stage("clone.py", ctx, tmp_path))
    result = run_stage("open_pr_local.py", ctx, tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        "open-pr: orch/CARDS-2 has no commits on top of origin/main: nothing to propose\n"
    )
    assert not (ctx.run_dir / "pull-request.json").exists()
    assert "orch/CARDS-2" not in [h.name for h in git.Repo(ctx.repository).heads]
