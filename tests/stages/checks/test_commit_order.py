"""lint-bug-commit-order: the pure rule, then the real check against real repositories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.stages.checks.commit_order import (
    CommitFiles,
    SetupError,
    classify_path,
    find_violations,
    read_branch_commits,
)

from conftest import ROOT, subprocess_env
from support.gitrepo import commit_files, origin_and_clone

BASE_FILES = {"app/core.py": "x = 1\n", "tests/test_core.py": "def test(): pass\n"}


def c(sha: str, *paths: str, subject: str = "") -> CommitFiles:
    return CommitFiles(sha=sha * 40, subject=subject or f"commit {sha}", paths=paths)


# --- classify_path -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_deck.py",
        "tests/data/fixture.json",  # anything under a tests/ directory
        "pkg/test/helpers.py",
        "src/test_utils.py",
        "src/deck_test.py",
        "conftest.py",
        "pkg/conftest.py",
    ],
)
def test_test_paths(path: str) -> None:
    assert classify_path(path) == "test"


@pytest.mark.parametrize(
    "path",
    [
        "cards/deck.py",
        "README.md",
        "tests.py",  # a file named tests is not a tests/ directory
        "src/testing/util.py",
        "attest_x.py",
        "test_data.txt",  # test_*.py only
        "docs/tests.md",
        "",
    ],
)
def test_production_paths(path: str) -> None:
    assert classify_path(path) == "production"


# --- find_violations -----------------------------------------------------------------


def test_fix_then_test_passes() -> None:
    assert find_violations([c("a", "cards/deck.py"), c("b", "tests/test_deck.py")]) == []


def test_fix_alone_passes() -> None:
    assert find_violations([c("a", "cards/deck.py")]) == []


def test_squashed_fix_and_test_is_one_violation() -> None:
    violations = find_violations(
        [c("a", "cards/deck.py", "tests/test_deck.py", subject="Fix off-by-one in deal()")]
    )
    assert len(violations) == 1
    assert violations[0].startswith('aaaaaaa "Fix off-by-one in deal()": touches both')


def test_test_before_fix_fails() -> None:
    violations = find_violations(
        [c("a", "tests/test_deck.py", subject="pin it"), c("b", "cards/deck.py", subject="fix")]
    )
    assert len(violations) == 1
    assert violations[0].startswith('aaaaaaa "pin it": test-only commit')
    assert 'bbbbbbb "fix"' in violations[0]


def test_mixed_second_commit_fails() -> None:
    violations = find_violations(
        [c("a", "cards/deck.py"), c("b", "cards/hand.py", "tests/test_hand.py", subject="more")]
    )
    assert len(violations) == 1
    assert violations[0].startswith('bbbbbbb "more": touches both')


def test_tests_only_branch_fails() -> None:
    violations = find_violations([c("a", "tests/test_deck.py")])
    assert len(violations) == 1
    assert "no commit on the branch changes production code" in violations[0]


def test_test_first_then_mixed_reports_both() -> None:
    violations = find_violations([c("a", "tests/t_test.py"), c("b", "x.py", "tests/y.py")])
    assert len(violations) == 2


def test_docs_only_commits_count_as_production() -> None:
    # Everything that is not a test is "production", docs included: a docs commit is
    # never mixed on its own, and it does satisfy "production lands first".
    assert find_violations([c("a", "README.md"), c("b", "docs/guide.md")]) == []
    assert find_violations([c("a", "cards/deck.py"), c("b", "README.md")]) == []
    assert len(find_violations([c("a", "README.md", "tests/test_x.py")])) == 1


def test_commit_without_paths_is_neutral() -> None:
    assert find_violations([c("a"), c("b", "cards/deck.py"), c("c", "tests/t.py")]) == []


def test_no_commits_is_a_violation() -> None:
    assert find_violations([]) == [
        "no commits on the branch: a bug fix needs at least the commit that fixes it"
    ]


# --- read_branch_commits -------------------------------------------------------------


def test_reads_branch_commits_oldest_first_with_renames(tmp_path: Path) -> None:
    repo = origin_and_clone(tmp_path, BASE_FILES)
    first = commit_files(repo, {"app/core.py": "x = 2\n"}, "fix core")
    second = commit_files(
        repo, {"app/core.py": None, "tests/moved.py": "x = 2\n"}, "move core into tests"
    )
    commits = read_branch_commits(Path(repo.working_dir), "origin/main")
    assert commits == [
        CommitFiles(first, "fix core", ("app/core.py",)),
        CommitFiles(second, "move core into tests", ("app/core.py", "tests/moved.py")),
    ]


def test_read_refuses_an_unknown_base_ref(tmp_path: Path) -> None:
    repo = origin_and_clone(tmp_path, BASE_FILES)
    with pytest.raises(SetupError, match="base ref 'origin/nope'"):
        read_branch_commits(Path(repo.working_dir), "origin/nope")


def test_read_refuses_a_directory_outside_git(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="not inside a git repository"):
        read_branch_commits(tmp_path, "origin/main")


# --- the real check, as a process ----------------------------------------------------


def check_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("ORCH_")}
    env.update(extra)
    return env


def run_check(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.stages.checks.commit_order", *args],
        cwd=cwd,
        env=check_env(**env),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def passing_clone(tmp_path: Path) -> Path:
    repo = origin_and_clone(tmp_path, BASE_FILES)
    commit_files(repo, {"app/core.py": "x = 2\n"}, "Fix core")
    commit_files(repo, {"tests/test_core.py": "def test(): assert 2\n"}, "Pin core")
    return Path(repo.working_dir)


@pytest.fixture
def squashed_clone(tmp_path: Path) -> Path:
    repo = origin_and_clone(tmp_path, BASE_FILES)
    commit_files(
        repo,
        {"app/core.py": "x = 2\n", "tests/test_core.py": "def test(): assert 2\n"},
        "Fix core with its test",
    )
    return Path(repo.working_dir)


def test_check_passes_a_fix_then_test_history(passing_clone: Path) -> None:
    result = run_check(passing_clone, ORCH_TICKET_KIND="bug-fix", ORCH_BASE_REF="origin/main")
    assert (result.returncode, result.stdout) == (0, "lint-bug-commit-order: OK (2 commits)\n")


def test_check_fails_a_squashed_history(squashed_clone: Path) -> None:
    result = run_check(squashed_clone, ORCH_TICKET_KIND="bug-fix", ORCH_BASE_REF="origin/main")
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert len(lines) == 2
    assert lines[0].endswith(
        '"Fix core with its test": touches both production code and '
        "tests; split it so the fix lands first and the test after it"
    )
    assert lines[1] == "lint-bug-commit-order: FAILED (1 violation(s))"


def test_base_defaults_to_origin_main(squashed_clone: Path) -> None:
    result = run_check(squashed_clone, ORCH_TICKET_KIND="bug-fix")
    assert result.returncode == 1


@pytest.mark.slow
def test_arguments_override_the_environment(squashed_clone: Path) -> None:
    # HEAD as base leaves nothing to judge; --kind feature skips before reading anything.
    result = run_check(
        squashed_clone, "--base", "HEAD", ORCH_TICKET_KIND="bug-fix", ORCH_BASE_REF="origin/main"
    )
    assert result.returncode == 1
    assert result.stdout.startswith("no commits on the branch")
    result = run_check(squashed_clone, "--kind", "feature", ORCH_TICKET_KIND="bug-fix")
    assert (result.returncode, result.stdout) == (
        0,
        "lint-bug-commit-order: skipped (ticket kind is feature, rule applies to bug-fix)\n",
    )


def test_other_kinds_are_skipped(squashed_clone: Path) -> None:
    result = run_check(squashed_clone, ORCH_TICKET_KIND="docs")
    assert result.returncode == 0
    assert "skipped (ticket kind is docs" in result.stdout


def test_unknown_kind_is_not_a_pass(squashed_clone: Path) -> None:
    result = run_check(squashed_clone)
    assert result.returncode == 2
    assert "ticket kind unknown" in result.stderr


def test_missing_base_ref_exits_2(passing_clone: Path) -> None:
    result = run_check(passing_clone, ORCH_TICKET_KIND="bug-fix", ORCH_BASE_REF="origin/gone")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"lint-bug-commit-order: base ref 'origin/gone' does not name a commit in {passing_clone}"
    )
    assert "Traceback" not in result.stderr


def test_outside_a_repository_exits_2(tmp_path: Path) -> None:
    result = run_check(tmp_path, ORCH_TICKET_KIND="bug-fix")
    assert result.returncode == 2
    assert "not inside a git repository" in result.stderr


def _dev_sh_can_import_git() -> bool:
    if (ROOT / ".venv" / "bin" / "python").exists():
        return True
    python3 = shutil.which("python3", path=_path_with_our_python())
    if python3 is None:
        return False
    probe = subprocess.run([python3, "-c", "import git"], capture_output=True, check=False)
    return probe.returncode == 0


def _path_with_our_python() -> str:
    # dev.sh falls back to `python3` on PATH; put this interpreter's directory first so a
    # venv's python3 (which has GitPython) is the one it finds.
    return str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")


@pytest.mark.slow
@pytest.mark.skipif(
    not _dev_sh_can_import_git(),
    reason="dev.sh needs .venv/bin/python or a python3 with GitPython on PATH",
)
@pytest.mark.parametrize(
    ("fixture", "code", "last_line"),
    [
        ("passing_clone", 0, "lint-bug-commit-order: OK (2 commits)"),
        ("squashed_clone", 1, "lint-bug-commit-order: FAILED (1 violation(s))"),
    ],
)
def test_through_dev_sh(
    fixture: str, code: int, last_line: str, request: pytest.FixtureRequest
) -> None:
    clone: Path = request.getfixturevalue(fixture)
    env = check_env(ORCH_TICKET_KIND="bug-fix", ORCH_BASE_REF="origin/main")
    env["PATH"] = _path_with_our_python()
    env.pop("PYTHONPATH", None)  # dev.sh must find the package by itself
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "dev.sh"), "lint-bug-commit-order"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == code, result.stderr
    assert result.stdout.splitlines()[-1] == last_line
