"""The demo's builder: a real project whose bugs are real and whose patches apply."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git
import pytest

from orchestrator.demo.run import EXPECTED, MARKER, DemoLayout, build_demo, mismatches
from orchestrator.domain.tickets import load_ticket
from orchestrator.stages.checks.commit_order import find_violations, read_branch_commits

from support.gitrepo import clone


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> DemoLayout:
    return build_demo(tmp_path_factory.mktemp("demo") / "work")


def unittest_suite(project: Path) -> subprocess.CompletedProcess[str]:
    """The demo project's own suite, stdlib only, exactly as its README says to run it."""
    return subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )


def apply_ticket(layout: DemoLayout, ticket_id: str, dest: Path) -> git.Repo:
    repo = clone(layout.origin, dest, branch=f"orch/{ticket_id}")
    repo.git.am(str(layout.tickets[ticket_id].with_suffix(".patch")))
    return repo


def restore_buggy_code(repo: git.Repo) -> None:
    """Keep the branch's tests, put the production code back as it is on main."""
    repo.git.checkout("origin/main", "--", "cards")


def test_layout(layout: DemoLayout) -> None:
    assert layout.origin == layout.workdir / "origin.git"
    assert set(layout.tickets) == set(EXPECTED) == {"CARDS-1", "CARDS-2", "CARDS-3"}
    origin = git.Repo(layout.origin)
    assert origin.bare
    assert [h.name for h in origin.heads] == ["main"]  # no scratch branch leaked


def test_tickets_parse(layout: DemoLayout) -> None:
    for ticket_id, path in layout.tickets.items():
        ticket = load_ticket(path)
        assert ticket.id == ticket_id
        assert ticket.fields.kind == "bug-fix"
        assert ticket.repository_location() == str(layout.origin)
        assert ticket.extra_files() == [path.with_suffix(".patch")]
        assert path.with_suffix(".patch").read_text().startswith("From ")


def test_project_suite_passes_on_the_buggy_main(layout: DemoLayout, tmp_path: Path) -> None:
    clone(layout.origin, tmp_path / "c")
    result = unittest_suite(tmp_path / "c")
    assert result.returncode == 0, result.stderr
    assert "Ran 9 tests" in result.stderr


def test_cards_1_is_one_squashed_commit_that_fails_the_check(
    layout: DemoLayout, tmp_path: Path
) -> None:
    repo = apply_ticket(layout, "CARDS-1", tmp_path / "c")
    commits = read_branch_commits(Path(repo.working_dir), "origin/main")
    assert [(c.subject, c.paths) for c in commits] == [
        ("Fix off-by-one in deal()", ("cards/deck.py", "tests/test_deck.py"))
    ]
    assert commits[0].sha == repo.head.commit.hexsha
    assert len(find_violations(commits)) == 1
    assert repo.head.commit.author.email == "dana@cards.example"  # am kept the author
    assert unittest_suite(tmp_path / "c").returncode == 0
    restore_buggy_code(repo)
    failing = unittest_suite(tmp_path / "c")
    assert failing.returncode == 1
    assert "test_deals_exactly_n_cards" in failing.stderr


def test_cards_2_is_fix_then_test_and_passes(layout: DemoLayout, tmp_path: Path) -> None:
    repo = apply_ticket(layout, "CARDS-2", tmp_path / "c")
    commits = read_branch_commits(Path(repo.working_dir), "origin/main")
    assert [(c.subject, c.paths) for c in commits] == [
        ("Count an ace as 1 when 11 would bust the hand", ("cards/hand.py",)),
        ("Add tests pinning soft-ace hand values", ("tests/test_hand.py",)),
    ]
    assert find_violations(commits) == []
    fixed = unittest_suite(tmp_path / "c")
    assert fixed.returncode == 0, fixed.stderr
    assert "Ran 13 tests" in fixed.stderr
    restore_buggy_code(repo)
    failing = unittest_suite(tmp_path / "c")
    assert failing.returncode == 1
    assert "test_ace_drops_to_one_rather_than_bust" in failing.stderr


def test_cards_3_is_in_order_but_incomplete_so_the_project_tests_fail(
    layout: DemoLayout, tmp_path: Path
) -> None:
    repo = apply_ticket(layout, "CARDS-3", tmp_path / "c")
    commits = read_branch_commits(Path(repo.working_dir), "origin/main")
    assert [c.subject for c in commits] == ["Print face cards by name", "Add tests for card names"]
    assert find_violations(commits) == []  # the commit-order check passes...
    failing = unittest_suite(tmp_path / "c")
    assert failing.returncode == 1  # ...and the project's own tests do not
    assert "King of hearts" in failing.stderr


def test_rebuild_is_byte_identical(layout: DemoLayout, tmp_path: Path) -> None:
    again = build_demo(tmp_path / "again")
    for ticket_id, path in layout.tickets.items():
        for name in (path.name, path.with_suffix(".patch").name):
            assert (again.tickets[ticket_id].parent / name).read_bytes() == (
                path.parent / name
            ).read_bytes()


def test_rebuild_replaces_a_demo_dir_but_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "d"
    build_demo(target)
    (target / "stale").write_text("from an earlier build")
    build_demo(target)
    assert not (target / "stale").exists()
    (target / MARKER).unlink()
    with pytest.raises(ValueError, match="not a demo directory"):
        build_demo(target)
    assert (target / "origin.git").exists()  # refused before deleting anything


def test_mismatches() -> None:
    assert mismatches({"CARDS-1": 0, "CARDS-2": 0, "CARDS-3": 3}, EXPECTED) == {}
    assert mismatches({"CARDS-1": 4, "CARDS-2": 0, "CARDS-3": 3}, EXPECTED) == {"CARDS-1": 4}
    assert mismatches({"CARDS-1": 0, "CARDS-2": 0}, EXPECTED) == {"CARDS-3": -1}
