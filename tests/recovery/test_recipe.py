from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.recipes import plan_recipe


def plan(tmp_path: Path, *commands: str) -> tuple[list[tuple[str, ...]], list[str]]:
    return plan_recipe(list(commands), clone_dir=tmp_path / "clone dir", allowlist=("git",))


def test_seed_recipe_becomes_argv_lists_with_the_clone_substituted(tmp_path: Path) -> None:
    clone = str((tmp_path / "clone dir").resolve())
    argvs, errors = plan(
        tmp_path,
        "git -C <clone> reset --soft HEAD~1",
        "git -C <clone> restore --staged -- tests/",
        "git -C <clone> commit -m 'fix: correct the off-by-one; really'",
    )
    assert errors == []
    assert argvs == [
        ("git", "-C", clone, "reset", "--soft", "HEAD~1"),
        ("git", "-C", clone, "restore", "--staged", "--", "tests/"),
        ("git", "-C", clone, "commit", "-m", "fix: correct the off-by-one; really"),
    ]


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("git status; rm -rf /", "[1]: shell operator ';' is not allowed"),
        ("git status && true", "[1]: shell operator '&&' is not allowed"),
        ("git log | head", "[1]: shell operator '|' is not allowed"),
        ("git log > /tmp/out", "[1]: shell operator '>' is not allowed"),
        ("git commit -m `id`", "[1]: shell syntax '`' is not allowed"),
        ("git commit -m $(id)", "[1]: shell syntax '$(' is not allowed"),
        ("git status\nrm x", "[1]: shell syntax '\\n' is not allowed"),
        ("rm -rf tests", "[1]: executable 'rm' is not on the recipe allow-list ['git']"),
        ("/usr/bin/git status", "[1]: executable '/usr/bin/git' is not on the recipe allow-list"),
        ("git -C /etc status", "[1]: path '/etc' is outside the clone"),
        ("git -C <clone>/.. status", "is outside the clone"),
        ("git add ../../outside", "[1]: path '../../outside' is outside the clone"),
        (
            "git add --pathspec-from-file=/etc/passwd",
            "[1]: path '/etc/passwd' is outside the clone",
        ),
        (
            "git -c core.hooksPath=/tmp/evil commit -m x",
            "[1]: git option '-c' is not allowed in a recipe",
        ),
        ("git --git-dir=.git status", "[1]: git option '--git-dir' is not allowed"),
        ("git diff --ext-diff", "[1]: git option '--ext-diff' is not allowed"),
        ("git log -p --textconv", "[1]: git option '--textconv' is not allowed"),
        ("git cherry-pick --strategy=evil x", "[1]: git option '--strategy' is not allowed"),
        ("git --exec-path=. status", "[1]: git option '--exec-path' is not allowed"),
        ("git --config-env=core.pager=X log", "[1]: git option '--config-env' is not allowed"),
        ("git diff --output=.git/config", "[1]: git would write '.git/config', inside .git"),
        ("git log -p --output .git/hooks/pre-commit", "inside .git"),
        ("git -C <clone>/sub diff --output=.git/config", "inside .git"),
        ("git -C <clone>/.git diff --output=config", "[1]: git -C"),
        ("git show --output=/tmp/x HEAD", "[1]: path '/tmp/x' is outside the clone"),
        ("git format-patch -o.git/x HEAD~1", "[1]: git would write '.git/x', inside .git"),
        ("git diff --output=sub/../../elsewhere", "outside the clone"),
        ("git bundle create .git/config HEAD", "[1]: git would write '.git/config', inside .git"),
        ("git push origin HEAD", "[1]: git 'push' is not an allowed recipe subcommand"),
        ("git", "[1]: git without a subcommand"),
        ("git commit -m 'unterminated", "[1]: cannot be split into arguments"),
    ],
)
def test_refused_recipes(tmp_path: Path, command: str, error: str) -> None:
    argvs, errors = plan(tmp_path, "git status", command)
    assert argvs == []  # one bad command refuses the whole recipe
    assert any(e.startswith(error) or error in e for e in errors), errors
    assert all(e.startswith("[1]") for e in errors)


def test_a_commit_message_may_mention_a_path(tmp_path: Path) -> None:
    argvs, errors = plan(tmp_path, "git commit -m /etc/passwd-is-not-touched")
    assert errors == [] and argvs[0][-1] == "/etc/passwd-is-not-touched"


def test_an_output_option_is_resolved_through_symbolic_links(tmp_path: Path) -> None:
    clone = tmp_path / "clone dir"
    (clone / ".git").mkdir(parents=True)
    (clone / "gitdir").symlink_to(clone / ".git")
    (clone / "away").symlink_to(tmp_path)
    _, errors = plan(tmp_path, "git diff --output=gitdir/config")
    assert errors == ["[0]: git would write 'gitdir/config', inside .git"]
    _, errors = plan(tmp_path, "git diff --output=away/x")
    assert errors == ["[0]: git would write 'away/x', outside the clone"]
    argvs, errors = plan(tmp_path, "git diff --output=notes/changes.diff")
    assert errors == [] and argvs == [("git", "diff", "--output=notes/changes.diff")]


def test_a_clone_path_with_spaces_quotes_and_non_ascii_is_one_argument(tmp_path: Path) -> None:
    # Split before the clone is put in (issue 27): a state dir under "~/My Projects" or
    # "/mnt/c/Users/Jane Doe" takes the same fixes as any other.
    clone = tmp_path / 'St ate "x" é' / "it's" / "clone"
    clone.mkdir(parents=True)
    argvs, errors = plan_recipe(
        ["git -C <clone> status", "git -C <clone> add -- '<clone>/sub dir/a.py'"],
        clone_dir=clone,
        allowlist=["git"],
    )
    assert errors == []
    assert argvs == [
        ("git", "-C", str(clone), "status"),
        ("git", "-C", str(clone), "add", "--", f"{clone}/sub dir/a.py"),
    ]
    _, errors = plan_recipe(["git -C <clone>/.. status"], clone_dir=clone, allowlist=["git"])
    assert errors == [f"[0]: path {str(clone / '..')!r} is outside the clone"]
