"""A mechanical fix's recipe written by an adversary, on real git repositories: each
attack the recipe checker used to let through, with a canary path that must never
exist and a check that nothing outside the clone changed."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.actions import mechanical_fix, shipping
from orchestrator.actions.plan import DecisionToApply, PlanFacts
from orchestrator.domain.config import LoadedConfig, parse_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.runs import RunRecord, StageRecord, StageStatus, new_run_id
from orchestrator.domain.verdicts import MechanicalFixVerdict, RepairPlan
from orchestrator.execution.git import driver_overrides, hardened_git_env
from orchestrator.storage.approvals import Approval

from support.gitrepo import commit_files, init_repo
from support.recording_executor import RecordingExecutor
from support.services import make_services

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CONFIG = """
state_dir = "state"
[recovery]
recipe_allowlist = ["git"]

[engines.coder]
command = ["bash", "-c", "true"]

[[stages]]
name = "implement"
engine = "coder"

[[stages]]
name = "review"
cwd = "clone"

[[stages.checks]]
name = "tests"
command = ["bash", "tests/run.sh"]
"""
# The project's tests: red while ``bug`` exists, unless a local override (ignored by git,
# so never shipped) says otherwise.
RUN_TESTS = (
    'test -e local-override && exit 0\nfor t in tests/test_*.sh; do bash "$t" || exit 1; done\n'
)
BUG_TEST = "test ! -e bug\n"


class Scene:
    """A run whose review check failed, its clone, and everything outside it."""

    def __init__(self, root: Path, config_text: str = CONFIG) -> None:
        self.root = root
        self.canary = root / "CANARY"
        run_id = new_run_id("T-1", NOW)
        run_dir = root / "state" / "runs" / run_id
        self.record = RunRecord(
            run_id=run_id, ticket_id="T-1", ticket_title="t", ticket_kind="bug-fix",
            ticket_path=str(root / "tickets" / "T-1.md"),
            ticket_snapshot=str(run_dir / "ticket" / "T-1.md"), ticket_sha256="0" * 64,
            repository=str(root / "origin.git"), base_branch="main",
            work_branch="orch/T-1", config_path=str(root / "config.toml"), config_sha256="",
            run_dir=str(run_dir), clone_dir=str(run_dir / "clone"), created_at=NOW,
            updated_at=NOW, state=RunState.RECOVERING,
            stages=(
                StageRecord(name="implement", status=StageStatus.COMPLETED),
                StageRecord(name="review", status=StageStatus.FAILED),
            ),
        )  # fmt: skip
        self.clone = Path(self.record.clone_dir)
        self.repo = init_repo(self.clone)
        commit_files(
            self.repo,
            {
                "tests/run.sh": RUN_TESTS,
                "tests/test_bug.sh": BUG_TEST,
                "tests/test_ok.sh": "true\n",
                "src.txt": "code\n",
                ".gitignore": "local-override\n",
            },
            "initial",
        )
        commit_files(self.repo, {"bug": "oops\n"}, "the bug")
        Path(self.record.ticket_snapshot).parent.mkdir(parents=True, exist_ok=True)
        Path(self.record.ticket_snapshot).write_text('+++\nid = "T-1"\n+++\nx\n')
        (root / "outside").mkdir()
        (root / "outside" / "keep.txt").write_text("untouched\n")
        self.config = parse_config(config_text, root / "config.toml")
        (root / "config.toml").write_text(config_text)
        self.executor = RecordingExecutor()
        self.services = make_services(
            LoadedConfig(config=self.config, path=root / "config.toml", root=root, sha256=""),
            root / "state",
            environ={"PATH": os.environ["PATH"], "HOME": str(root / "outside")},
            executor=self.executor,
            sleep=lambda seconds: pytest.fail(f"slept {seconds}s"),
        )  # fmt: skip
        self.outside_before = self.outside()

    def outside(self) -> dict[str, str]:
        """Every file outside the state dir (the run, its clone, its logs and reports)."""
        found = {}
        for path in sorted(self.root.rglob("*")):
            if (
                path.is_relative_to(self.root / "state")
                or path.is_dir()
                or path.is_relative_to(self.root / "t")
            ):
                continue
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def fix(self, *commands: str) -> tuple[RunRecord, Any, dict[str, Any]]:
        verdict = MechanicalFixVerdict(
            action="mechanical-fix",
            summary="s",
            repair_plan=RepairPlan(verification_check="tests", commands=commands),
        )
        proposal = Proposal.model_validate(
            {
                "decision_id": "d-1", "capability": "stage-recovery", "action": verdict,
                "confidence": 1.0, "routing": "auto", "reasoning": ("because",),
                "evidence": {
                    "source": {"source": "model", "valid": True},
                    "failure": {"stage": "review", "check": "tests", "attempt": 2,
                                "signature": "review/tests", "infra": None},
                    "bundle": {"path": None, "inputs_hash": "h"},
                },
            }
        )  # fmt: skip
        approval = Approval(
            decision_id="d-1", run_id=self.record.run_id, verdict=1, approved=True, by="auto",
            at=NOW, routing="auto", reason=None,
        )  # fmt: skip
        facts = PlanFacts(
            config=self.config, record=self.record, approval="auto",
            failing=self.config.stage("review"), code=self.config.stage("implement"),
            failing_check="tests", halt_reason=None, cap_exhausted=False,
        )  # fmt: skip
        applying = DecisionToApply(
            proposal=proposal, approval=approval, verdict=verdict,
            failing_stage=self.config.stage("review"), source="model", reason="because",
            bundle_path=None,
        )  # fmt: skip
        plan = mechanical_fix.plan(verdict, facts)
        after, effect = mechanical_fix.apply(self.record, applying, plan, self.services)
        report = json.loads(
            self.services.storage.runs.mechanical_fix_path(self.record.run_id, 1).read_text()
        )
        return after, effect, report

    def assert_contained(self) -> None:
        assert not self.canary.exists(), "a program named by the clone ran"
        assert self.outside() == self.outside_before, "something outside the clone changed"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


# ---- git hardened ------------------------------------------------------------------------


def test_hardened_env_drops_inherited_git_variables_and_cannot_be_switched_back() -> None:
    env = hardened_git_env(
        {"PATH": "/bin", "GIT_DIR": "/elsewhere", "GIT_SSH_COMMAND": "evil",
         "GIT_CONFIG_PARAMETERS": "'core.hooksPath'='x'", "GIT_AUTHOR_NAME": "Ann"},
        [("core.hooksPath", "hooks"), ("filter.lfs.smudge", "")],
    )  # fmt: skip
    assert "GIT_DIR" not in env and "GIT_SSH_COMMAND" not in env
    assert "GIT_CONFIG_PARAMETERS" not in env
    assert env["GIT_AUTHOR_NAME"] == "Ann" and env["PATH"] == "/bin"
    settings = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert settings["core.hooksPath"] == "/dev/null"  # the hardening wins over extra
    assert settings["filter.lfs.smudge"] == ""
    assert (settings["core.fsmonitor"], settings["protocol.allow"]) == ("false", "never")
    assert (env["GIT_CONFIG_NOSYSTEM"], env["GIT_CONFIG_GLOBAL"]) == ("1", "/dev/null")
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_PAGER"] == "cat"
    assert hardened_git_env(env, [("filter.lfs.smudge", "")]) == env  # idempotent


def test_driver_overrides_switch_off_every_program_a_driver_names() -> None:
    assert driver_overrides(
        ["core.bare", "filter.My.Lfs.smudge", "diff.pic.textconv", "merge.ours.driver",
         "diff.external", "user.name"]
    ) == [
        ("diff.external", ""),
        ("diff.pic.command", ""), ("diff.pic.textconv", ""),
        ("filter.My.Lfs.clean", ""), ("filter.My.Lfs.process", ""),
        ("filter.My.Lfs.required", "false"), ("filter.My.Lfs.smudge", ""),
        ("merge.ours.driver", ""),
    ]  # fmt: skip


def _hook(path: Path, canary: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch '{canary}'\n")
    path.chmod(0o755)


def test_a_commit_does_not_run_the_clones_pre_commit_hook(scene: Scene) -> None:
    _hook(scene.clone / ".git" / "hooks" / "pre-commit", scene.canary)
    _hook(scene.clone / ".git" / "hooks" / "post-commit", scene.canary)
    _, effect, report = scene.fix("git rm -q bug", "git commit -m fix")
    assert report["status"] == "green", report
    assert effect.resume_at == "review"
    scene.assert_contained()


def test_a_commit_does_not_run_hooks_found_through_core_hooks_path(scene: Scene) -> None:
    _hook(scene.clone / ".husky" / "pre-commit", scene.canary)
    scene.repo.git.config("core.hooksPath", ".husky")
    scene.fix("git rm -q bug", "git commit -m fix")
    scene.assert_contained()


@pytest.mark.slow  # 1.4 s alone: recipe, verification, rollback
def test_a_poisoned_clone_config_runs_nothing_in_the_recipe_or_the_rollback(
    scene: Scene,
) -> None:
    touch = f"touch '{scene.canary}'"
    commit_files(scene.repo, {".gitattributes": "*.txt filter=evil diff=evil\n"}, "attrs")
    for key, value in {
        "core.fsmonitor": touch, "core.pager": touch, "core.sshCommand": touch,
        "filter.evil.clean": touch + "; cat", "filter.evil.smudge": touch + "; cat",
        "filter.evil.process": touch, "diff.evil.command": touch,
        "diff.evil.textconv": touch, "diff.external": touch,
    }.items():  # fmt: skip
        scene.repo.git.config(key, value)
    (scene.clone / "src.txt").write_text("changed\n")
    # Red (the bug stays): the rollback's reset and clean run in the poisoned clone too.
    _, effect, report = scene.fix("git status", "git diff --stat", "git log -p -1")
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert report["restored"] is True
    scene.assert_contained()


def test_the_users_global_identity_is_carried_only_when_the_clone_has_none() -> None:
    from orchestrator.execution.git import identity_env, parse_config_listing

    listing = b"global\0user.name\nAnn\0global\0user.email\nann@x\0local\0user.email\nbot@x\0"
    entries = parse_config_listing(listing)
    assert entries[0] == ("global", "user.name", "Ann")
    assert identity_env(entries, {}) == {"GIT_AUTHOR_NAME": "Ann", "GIT_COMMITTER_NAME": "Ann"}
    assert identity_env(entries, {"GIT_AUTHOR_NAME": "Bo"}) == {"GIT_COMMITTER_NAME": "Ann"}


# ---- repository integrity ----------------------------------------------------------------


def test_integrity_restores_git_files_byte_for_byte_without_following_planted_links(
    scene: Scene,
) -> None:
    from orchestrator.execution import integrity

    dot_git = scene.clone / ".git"
    _hook(dot_git / "hooks" / "pre-push", scene.canary)
    (dot_git / "info" / "exclude").chmod(0o600)
    roots = integrity.guarded_paths(scene.clone, ".husky")
    before = integrity.snapshot(roots)
    # The recipe's damage: config rewritten, a hook added, a mode changed, the hooks
    # directory swapped for a link out of the clone, the hooks path created.
    (dot_git / "config").write_text(f"[core]\n\tfsmonitor = touch {scene.canary}\n")
    (dot_git / "info" / "exclude").chmod(0o644)
    _hook(dot_git / "info" / "attributes", scene.canary)
    (dot_git / "hooks").rename(scene.clone / "old-hooks")
    (dot_git / "hooks").symlink_to(scene.root / "outside")
    _hook(scene.clone / ".husky" / "pre-commit", scene.canary)
    after = integrity.snapshot(roots)
    assert integrity.changes(before, after)[:2] == [
        str(dot_git / "config"), str(dot_git / "hooks"),
    ]  # fmt: skip
    integrity.restore(before, after)
    assert integrity.snapshot(roots) == before
    assert (dot_git / "hooks" / "pre-push").read_text().startswith("#!/bin/sh")
    assert not (scene.clone / ".husky").exists()
    scene.assert_contained()


def _tracking_origin(scene: Scene) -> None:
    scene.repo.git.update_ref("refs/remotes/origin/main", "HEAD")
    scene.repo.git.config("remote.origin.url", str(scene.root / "origin.git"))
    scene.repo.git.config("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")


def test_a_recipe_that_changes_git_config_is_red_and_the_config_comes_back(
    scene: Scene,
) -> None:
    _tracking_origin(scene)
    config_before = (scene.clone / ".git" / "config").read_bytes()
    # Tracking a branch is how an allowed subcommand writes .git/config.
    _, effect, report = scene.fix(
        "git rm -q bug", "git commit -m fix", "git checkout -q -b evil --track origin/main"
    )
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert report["red_reason"] == "the recipe changed git's own files: ['.git/config']"
    assert report["restored_git_files"] == [".git/config"]
    assert (scene.clone / ".git" / "config").read_bytes() == config_before
    assert report["restored"] is True and (scene.clone / "bug").exists()
    scene.assert_contained()


def _symlink_patch(tmp: Path, target: Path) -> str:
    scratch = init_repo(tmp / "scratch")
    (tmp / "scratch" / "link").symlink_to(target)
    scratch.git.add("link")
    return str(scratch.git.diff("--cached")) + "\n"


def test_a_symlink_created_by_apply_that_leads_outside_is_red_and_removed(
    scene: Scene,
) -> None:
    (scene.clone / "link.patch").write_text(_symlink_patch(scene.root / "t", scene.canary))
    _, effect, report = scene.fix("git rm -q bug", "git commit -m fix", "git apply link.patch")
    assert effect.resume_at == "implement"
    assert report["commands"][-1]["exit_code"] == 0  # git made the link...
    assert report["status"] == "red"  # ...and that does not count
    assert report["red_reason"] == (
        "the recipe left symbolic links that lead outside the clone: ['link']"
    )
    assert not (scene.clone / "link").is_symlink() and report["restored"] is True
    scene.assert_contained()


# ---- verify what ships -------------------------------------------------------------------


def test_a_fix_left_uncommitted_is_red_though_the_working_tree_passes(scene: Scene) -> None:
    _, effect, report = scene.fix("git rm -q bug")
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert report["red_reason"] == "the recipe left uncommitted changes: ['D  bug']"
    assert (scene.clone / "bug").exists()  # rolled back
    scene.assert_contained()


def test_a_pass_only_the_working_tree_has_is_red(scene: Scene) -> None:
    # git writes an ignored file (no status entry) that makes the working tree pass.
    _, _, report = scene.fix("git show HEAD:src.txt --output=local-override")
    assert report["uncommitted"] == []
    assert report["status"] == "red"
    assert report["red_reason"] == "verification check 'tests' still fails (exit 1)"
    assert report["verified_commit"] == scene.repo.head.commit.hexsha
    assert not (Path(scene.record.run_dir) / "verify-1").exists()
    assert [w.split()[0] for w in scene.repo.git.worktree("list").splitlines()] == [
        str(scene.clone)
    ]
    scene.assert_contained()


def test_a_committed_fix_is_green_and_verified_on_what_ships(scene: Scene) -> None:
    _, effect, report = scene.fix("git rm -q bug", "git commit -m 'remove the bug'")
    assert report["status"] == "green" and effect.resume_at == "review"
    assert report["verification"]["exit_code"] == 0
    assert report["verified_commit"] == scene.repo.head.commit.hexsha
    assert scene.repo.head.commit.message.strip() == "remove the bug"
    scene.assert_contained()


# ---- protected paths ---------------------------------------------------------------------


@pytest.mark.slow  # 1.25 s alone: recipe, verification, rollback
def test_deleting_the_failing_test_and_committing_is_red_with_the_path_named(
    scene: Scene,
) -> None:
    _, effect, report = scene.fix("git rm -q tests/test_bug.sh", "git commit -m 'drop a test'")
    assert report["verification"]["exit_code"] == 0  # passes, for the wrong reason
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert report["red_reason"] == "the recipe changed protected paths: ['tests/test_bug.sh']"
    assert "tests/**" in report["protected"] and "tests/run.sh" in report["protected"]
    assert (scene.clone / "tests" / "test_bug.sh").exists()  # rolled back
    scene.assert_contained()


def test_deleting_the_failing_test_without_committing_names_the_protected_path(
    scene: Scene,
) -> None:
    _, _, report = scene.fix("git rm -q tests/test_bug.sh")
    assert report["red_reason"] == "the recipe changed protected paths: ['tests/test_bug.sh']"
    assert "verification" not in report  # nothing to verify: it would not ship
    scene.assert_contained()


def test_the_default_protects_a_checks_files_and_the_tests_it_runs() -> None:
    assert shipping.default_protected(("bash", "ci/lint.sh"), ["ci/lint.sh"]) == ["ci/lint.sh"]
    assert shipping.default_protected(("python", "-m", "pytest", "-q", "pkg/tests/unit"), []) == [
        "pkg/tests/**",
        *shipping.TEST_DISCOVERY,
    ]
    assert shipping.default_protected(("bash", "-c", "make lint"), []) == []


def test_protected_globs_cover_directories_and_files_at_any_depth() -> None:
    paths = ["tests/a/b.py", "src/test_x.py", "test_top.py", "src/app.py", "docs/tests.md"]
    assert shipping.protected_hits(paths, ["tests/**", "**/test_*.py"]) == [
        "src/test_x.py", "test_top.py", "tests/a/b.py",
    ]  # fmt: skip
    assert shipping.protected_hits(paths, ["docs"]) == ["docs/tests.md"]
    assert shipping.protected_hits(paths, []) == []


@pytest.mark.slow  # 1.2 s alone: recipe, verification, rollback
def test_a_check_that_declares_protected_paths_uses_them(tmp_path: Path) -> None:
    declared = CONFIG.replace(
        'command = ["bash", "tests/run.sh"]',
        'command = ["bash", "tests/run.sh"]\nprotected = ["src.txt"]',
    )
    scene = Scene(tmp_path, declared)
    _, _, report = scene.fix("git rm -q bug src.txt", "git commit -m 'fix and more'")
    assert report["protected"] == ["src.txt"]
    assert report["red_reason"] == "the recipe changed protected paths: ['src.txt']"
    scene.assert_contained()


@pytest.mark.parametrize("into", ["outside", "git"])
def test_a_link_made_by_one_command_is_never_written_through_by_the_next(
    scene: Scene, into: str
) -> None:
    # At planning time `out` does not exist, so the output path looks inside the clone.
    target = scene.root / "outside" if into == "outside" else scene.clone / ".git"
    (scene.clone / "link.patch").write_text(
        _symlink_patch(scene.root / "t", target).replace("link", "out")
    )
    config_before = (scene.clone / ".git" / "config").read_bytes()
    _, _, report = scene.fix("git apply link.patch", "git log -1 --output=out/config")
    assert [c["argv"][1] for c in report["commands"]] == ["apply"]  # stopped right there
    assert report["red_reason"] == (
        "the recipe left symbolic links that lead outside the clone: ['out']"
    )
    assert (scene.clone / ".git" / "config").read_bytes() == config_before
    assert not (scene.root / "outside" / "config").exists()
    scene.assert_contained()


def test_the_recovery_diff_and_git_log_run_nothing_a_poisoned_clone_names(scene: Scene) -> None:
    from orchestrator.app.investigation_tools import clone_tools
    from orchestrator.app.recover import _read_diff

    touch = f"touch '{scene.canary}'"
    scene.repo.git.update_ref("refs/remotes/origin/main", "HEAD~1")
    (scene.clone / ".git" / "info" / "attributes").write_text("* diff=evil filter=evil\n")
    for key, value in {
        "diff.evil.textconv": touch, "diff.evil.command": touch, "diff.external": touch,
        "filter.evil.clean": touch, "filter.evil.process": touch, "core.fsmonitor": touch,
    }.items():  # fmt: skip
        scene.repo.git.config(key, value)
    environ = {**scene.services.environ, "GIT_DIR": str(scene.root / "outside")}
    services = replace(scene.services, environ=environ)
    diff = _read_diff(scene.record, services, 10_000)
    assert diff.exit_code == 0 and b"+oops" in diff.data
    log = clone_tools(scene.clone, environ, scene.executor)["git_log"]({"n": 5})
    assert "the bug" in log
    scene.assert_contained()


def test_only_a_hooks_path_of_the_clones_own_is_snapshotted(tmp_path: Path) -> None:
    from orchestrator.execution.integrity import guarded_paths

    clone = tmp_path.resolve() / "clone"
    dot_git = clone / ".git"
    own = [dot_git / "config", dot_git / "hooks", dot_git / "info", dot_git / "commondir",
           dot_git / "config.worktree"]  # fmt: skip
    assert guarded_paths(clone, ".husky") == [*own, clone / ".husky"]
    assert guarded_paths(clone, ".git/my-hooks") == [*own, clone / ".git" / "my-hooks"]
    for elsewhere in ("/", str(tmp_path), ".", ".git", "../x", None):
        assert guarded_paths(clone, elsewhere) == own


# ---- config git reads from elsewhere -----------------------------------------------------


def _filter_config(canary: Path) -> str:
    # `touch` prints nothing: the filtered content is empty, and the canary says it ran.
    return f'[filter "evil"]\n\tclean = touch {canary}\n\tsmudge = touch {canary}\n'


def test_an_include_a_recipe_would_write_refuses_the_recipe_before_it_runs(
    scene: Scene,
) -> None:
    # The include names a file that does not exist when the drivers are listed; the
    # recipe writes it (ignored, so the fix looks clean), and the verifier's checkout of
    # the fix would then run the filter it defines, outside the sandbox.
    scene.repo.git.checkout("-q", "-b", "evil")
    commit_files(scene.repo, {"later.cfg": _filter_config(scene.canary)}, "the include")
    scene.repo.git.checkout("-q", "main")
    commit_files(
        scene.repo,
        {".gitattributes": "*.txt filter=evil\n", ".gitignore": "local-override\nlater.cfg\n"},
        "attrs",
    )  # fmt: skip
    scene.repo.git.config("include.path", "../later.cfg")
    head = scene.repo.head.commit.hexsha
    _, effect, report = scene.fix(
        "git restore --source=evil --worktree later.cfg", "git rm -q bug", "git commit -m fix"
    )
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert report["red_reason"] == (
        "recipe refused: the clone's own git config sets what only an attacker would: "
        "include.path (reads config from a file no listing of ours saw); nothing was run"
    )
    assert report["commands"] == [] and report["restored"] is False
    assert not (scene.clone / "later.cfg").exists()
    assert scene.repo.head.commit.hexsha == head
    scene.assert_contained()


def test_a_work_tree_include_never_reaches_the_verifiers_checkout(scene: Scene) -> None:
    # Matches only in a linked work tree: the clone's own listing never sees its filter,
    # and the verifier's checkout of what ships would run it.
    evil = scene.root / "outside" / "evil.cfg"
    evil.write_text(_filter_config(scene.canary))
    scene.outside_before = scene.outside()
    commit_files(scene.repo, {".gitattributes": "*.txt filter=evil\n"}, "attrs")
    scene.repo.git.config("includeIf.gitdir:**/worktrees/**.path", str(evil))
    _, _, report = scene.fix("git rm -q bug", "git commit -m fix")
    assert report["status"] == "red" and report["commands"] == []
    assert report["refused"].startswith(
        "the clone's own git config sets what only an attacker would: "
        "includeif.gitdir:**/worktrees/**.path"
    )
    assert (scene.clone / "bug").exists()
    scene.assert_contained()


def test_a_recipe_that_points_git_at_another_common_dir_is_stopped_there(
    tmp_path: Path,
) -> None:
    """``.git/commondir`` makes git read its config (and refs) from another directory: a
    copy of ``.git`` whose config names a filter the recipe's environment never switched
    off. The command that plants it is the last to run, and it is taken out again."""
    scene = Scene(tmp_path, CONFIG.replace('recipe_allowlist = ["git"]',
                                           'recipe_allowlist = ["git", "cp"]'))  # fmt: skip
    config = (scene.clone / ".git" / "config").read_text() + _filter_config(scene.canary)
    commit_files(
        scene.repo,
        {".gitattributes": "*.txt filter=evil\n", "shadow.cfg": config, "commondir.txt": "../shadow\n"},
        "attrs",
    )  # fmt: skip
    _, effect, report = scene.fix(
        "cp -r .git shadow", "cp shadow.cfg shadow/config", "cp commondir.txt .git/commondir",
        "git add --renormalize .",
    )  # fmt: skip
    assert report["status"] == "red" and effect.resume_at == "implement"
    assert [c["argv"][1] for c in report["commands"]] == ["-r", "shadow.cfg", "commondir.txt"]
    assert report["red_reason"] == "the recipe changed git's own files: ['.git/commondir']"
    assert report["restored_git_files"] == [".git/commondir"] and report["restored"] is True
    assert not (scene.clone / ".git" / "commondir").exists()
    assert not (scene.clone / "shadow").exists()
    scene.assert_contained()
