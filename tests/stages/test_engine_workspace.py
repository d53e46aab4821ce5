"""Only the project's changes are committed (issue 42): what an engine writes for itself
(aider's chat history, input history and tags cache; its line in ``.gitignore``) is left
out of the commit and listed as such, whatever the ticket's own change is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from orchestrator.domain.engine_files import (
    SUMMARY_MARKER,
    WorkspaceSummary,
    engine_own,
    engine_pattern,
    kept_ignore_change,
    left_out_name,
    read_summary,
    summarise,
    summary_line,
)
from orchestrator.stages._stagelib import Clone, open_clone
from orchestrator.stages.engine_workspace import commit

from conftest import subprocess_env, write_ticket

# -- the rule, pure -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "tracked", "own"),
    [
        (".aider.chat.history.md", False, True),
        (".aider.input.history", False, True),
        (".aider.tags.cache.v4/cache.db", False, True),
        ("sub/.aider.llm.history", False, True),
        # The project's own file, whatever its name: tracked before, it stays.
        (".aider-notes.md", True, False),
        (".aider.conf.yml", True, False),
        ("src/aider.py", False, False),
        ("docs/.aider notes\nx.md", False, True),
        ("docs/my .aider notes.md", False, False),
        ("x.aider", False, False),
        (".gitignore", False, False),
    ],
)
def test_what_is_the_engines_own(path: str, tracked: bool, own: bool) -> None:
    assert engine_own(path, tracked=tracked) is own


def test_a_cache_directory_is_listed_once() -> None:
    assert left_out_name(".aider.tags.cache.v4/cache.db") == ".aider.tags.cache.v4/"
    assert left_out_name(".aider.tags.cache.v4/a/b") == ".aider.tags.cache.v4/"
    assert left_out_name(".aider.chat.history.md") == ".aider.chat.history.md"
    assert left_out_name("src/x.py") == "src/x.py"


@pytest.mark.parametrize(
    ("line", "ours"),
    [
        (".aider*\n", True),
        ("/.aider.chat.history.md", True),
        ("**/.aider.tags.cache.v4/", True),
        ("!.aider-notes.md", False),
        ("# .aider*", False),
        ("build/", False),
        ("docs/.aider*", False),
        (".env", False),
        ("", False),
    ],
)
def test_which_ignore_lines_are_the_engines(line: str, ours: bool) -> None:
    assert engine_pattern(line) is ours


@pytest.mark.parametrize(
    ("before", "after", "kept"),
    [
        # aider's own edit, nothing else: left out.
        ("build/\n", "build/\n.aider*\n", None),
        # ...to a file without a final newline, which aider adds first.
        ("build/", "build/\n.aider*\n", None),
        # A new .gitignore that only hides aider: left out.
        (None, ".aider*\n", None),
        (None, "\n.aider*\n", None),
        # The ticket's own change, with aider's line mixed in: the ticket's part stays.
        ("build/\n", "build/\ndist/\n.aider*\n", "build/\ndist/\n"),
        ("build/\n", ".aider*\nbuild/\n*.log\n", "build/\n*.log\n"),
        # The ticket's own change alone: committed as it is.
        ("build/\n", "dist/\n", "dist/\n"),
        (None, "node_modules/\n", "node_modules/\n"),
        # A removed line is the project's change too.
        ("build/\n.aider*\n", "build/\n", "build/\n"),
    ],
)
def test_what_of_an_ignore_file_change_is_committed(
    before: str | None, after: str, kept: str | None
) -> None:
    assert kept_ignore_change(before, after) == kept


def test_the_summary_survives_hostile_names_and_lookalikes() -> None:
    summary = summarise(["a b.py", "new\nline.py"], [".aider.chat.history.md"])
    line = summary_line(summary)
    assert "\n" not in line
    forged = SUMMARY_MARKER + '{"committed": ["x"], "left_out": [], '
    forged += '"committed_count": 1, "left_out_count": 0}'
    # The last one counts: the commit step prints its own last.
    assert read_summary(f"{forged}\nother\n{line}\n") == summary
    assert read_summary("nothing here\n") is None
    assert read_summary(SUMMARY_MARKER + '{"committed": [1]}') is None
    assert read_summary(SUMMARY_MARKER + "not json") is None
    many = summarise([f"f{i}" for i in range(80)], [])
    assert len(many.committed) == 50 and many.committed_count == 80


# -- in a real clone --------------------------------------------------------------------


def _repo(tmp_path: Path, files: dict[str, str]) -> git.Repo:
    repo = git.Repo.init(tmp_path / "clone", initial_branch="work")
    with repo.config_writer() as config:
        config.set_value("user", "name", "t")
        config.set_value("user", "email", "t@example.invalid")
    for name, text in files.items():
        (tmp_path / "clone" / name).write_text(text, encoding="utf-8")
    repo.git.add("-A")
    repo.git.commit("-m", "base")
    return repo


def opened(repo: git.Repo) -> Clone:
    """``repo`` as the stage program opens it."""
    return open_clone(Path(repo.working_dir), os.environ)


def _aider_was_here(clone: Path) -> None:
    """What aider 0.86 leaves in a clone beside its edit (with its default --gitignore)."""
    (clone / ".aider.chat.history.md").write_text("# aider chat started\n#### the prompt\n")
    (clone / ".aider.input.history").write_text("")
    cache = clone / ".aider.tags.cache.v4"
    cache.mkdir()
    (cache / "cache.db").write_bytes(b"SQLite format 3\0")
    gitignore = clone / ".gitignore"
    text = gitignore.read_text() if gitignore.exists() else ""
    gitignore.write_text(text + ".aider*\n")


def _committed(repo: git.Repo) -> dict[str, bytes]:
    tree = repo.head.commit.tree
    return {
        str(blob.path): blob.data_stream.read()
        for blob in tree.traverse()
        if isinstance(blob, git.Blob)
    }


def test_aiders_files_and_its_ignore_line_stay_out_of_the_commit(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        {"app.py": "x = 1\n", ".gitignore": "build/\n", ".aider-notes.md": "ours\n"},
    )
    clone = Path(repo.working_dir)
    _aider_was_here(clone)
    (clone / "app.py").write_text("x = 2\n")
    (clone / ".aider-notes.md").write_text("ours, changed\n")  # the project's: stays
    (clone / "with space\nand newline.py").write_text("y = 1\n")
    (clone / "*.py").write_text("a literal name, not a pattern\n")
    (clone / "link").symlink_to(".aider.chat.history.md")  # a link is the project's change
    # The engine staged its chat history itself: that chooses nothing.
    repo.git.add("-f", ".aider.chat.history.md")

    made, summary = commit(opened(repo), "Ticket T-1", "feature")

    assert made == ["Ticket T-1"]
    files = _committed(repo)
    assert not any(".aider." in name for name in files)
    assert files[".gitignore"] == b"build/\n"  # aider's line left out with the rest
    assert files[".aider-notes.md"] == b"ours, changed\n"
    assert files["app.py"] == b"x = 2\n"
    assert files["with space\nand newline.py"] == b"y = 1\n"
    assert files["*.py"] == b"a literal name, not a pattern\n"
    assert files["link"] == b".aider.chat.history.md"
    assert summary == WorkspaceSummary(
        committed=("*.py", ".aider-notes.md", "app.py", "link", "with space\nand newline.py"),
        left_out=(
            ".aider.chat.history.md",
            ".aider.input.history",
            ".aider.tags.cache.v4/",
            ".gitignore",
        ),
        committed_count=5,
        left_out_count=4,
    )


def test_a_tickets_own_gitignore_change_is_committed_without_aiders_line(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path, {"app.py": "x = 1\n", ".gitignore": "build/\n"})
    clone = Path(repo.working_dir)
    (clone / ".gitignore").write_text("build/\ndist/\n")  # the ticket: ignore dist/
    _aider_was_here(clone)

    made, summary = commit(opened(repo), "Ignore dist", "bug-fix")

    assert made == ["fix: Ignore dist"]
    assert _committed(repo)[".gitignore"] == b"build/\ndist/\n"
    assert summary.committed == (".gitignore",)
    # Committed, and listed as left out too: its engine line did not go in.
    assert ".gitignore" in summary.left_out
    assert (clone / ".gitignore").read_text() == "build/\ndist/\n.aider*\n"


def test_with_only_the_engines_files_there_is_nothing_to_commit(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"app.py": "x = 1\n"})
    head = repo.head.commit.hexsha
    _aider_was_here(Path(repo.working_dir))  # a new .gitignore that only hides aider

    made, summary = commit(opened(repo), "Ticket T-1", "feature")

    assert made == [] and repo.head.commit.hexsha == head
    assert summary.committed == () and summary.left_out_count == 4


def test_the_commit_step_prints_its_summary_last(tmp_path: Path) -> None:
    """The real script, as the orchestrator starts it: what it prints last is what the
    attempt records. A bug-fix ticket: the fix, then its test, neither with aider's files."""
    repo = _repo(tmp_path, {"app.py": "x = 1\n"})
    clone = Path(repo.working_dir)
    _aider_was_here(clone)
    (clone / "app.py").write_text("x = 2\n")
    (clone / "tests").mkdir()
    (clone / "tests" / "test_app.py").write_text("def test(): pass\n")
    ticket = write_ticket(tmp_path / "t", kind="bug-fix")

    result = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator.stages.engine_workspace", "commit"],
        cwd=clone,
        env=subprocess_env(ORCH_TICKET_FILE=str(ticket)),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "committed: fix: Ticket T-1"
    assert lines[1] == "committed: test: Ticket T-1"
    assert "left out (the engine's own): '.aider.chat.history.md'" in lines
    assert lines[-1].startswith(SUMMARY_MARKER)
    summary = read_summary(result.stdout)
    assert summary is not None
    assert summary.committed == ("app.py", "tests/test_app.py")
    assert summary.left_out == (
        ".aider.chat.history.md",
        ".aider.input.history",
        ".aider.tags.cache.v4/",
        ".gitignore",
    )
    subjects = [c.summary for c in repo.iter_commits("HEAD", max_count=2)]
    assert subjects == ["test: Ticket T-1", "fix: Ticket T-1"]
    assert not any(".aider" in name or name == ".gitignore" for name in _committed(repo))


def test_what_the_engine_committed_itself_is_judged_like_the_rest(tmp_path: Path) -> None:
    """A commit of the engine's own (a ``command`` engine's ``git add -A && git commit``)
    is folded into the orchestrator's: its chat history does not ride along in it."""
    repo = _repo(tmp_path, {"app.py": "x = 1\n"})
    base = repo.head.commit.hexsha
    clone = Path(repo.working_dir)
    _aider_was_here(clone)
    (clone / "app.py").write_text("x = 2\n")
    repo.git.add("-A", "-f")
    repo.git.commit("-m", "engine's own commit")
    (clone / "sub").mkdir()
    (clone / "sub" / ".gitignore").write_text(".aider*\n")  # one deeper: the same rule
    (clone / "sub" / "kept.py").write_text("k = 1\n")

    made, summary = commit(opened(repo), "Ticket T-1", "feature", base)

    assert made == ["Ticket T-1"]
    assert repo.head.commit.parents[0].hexsha == base
    assert set(_committed(repo)) == {"app.py", "sub/kept.py"}
    assert summary.left_out == (
        ".aider.chat.history.md",
        ".aider.input.history",
        ".aider.tags.cache.v4/",
        ".gitignore",
        "sub/.gitignore",
    )


def test_a_linked_ignore_file_is_committed_as_the_link_it_is(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"app.py": "x = 1\n", "ignores.txt": "build/\n.aider*\n"})
    clone = Path(repo.working_dir)
    (clone / ".gitignore").symlink_to("ignores.txt")  # git does not read a linked one

    _, summary = commit(opened(repo), "Ticket T-1", "feature")

    assert summary.committed == (".gitignore",) and summary.left_out == ()
    assert _committed(repo)[".gitignore"] == b"ignores.txt"


def test_an_engine_printing_a_summary_line_of_its_own_is_not_believed(tmp_path: Path) -> None:
    """The orchestrator reads the summary only from what the commit step printed (the
    log from where that step began): a line the engine printed before is not read, even
    when the commit step printed none."""
    from orchestrator.execution.engine_stage import _summary

    forged = summary_line(summarise(["innocent.py"], []))
    genuine = summary_line(summarise(["greeting.py"], [".aider.chat.history.md"]))
    log = tmp_path / "attempt.log"
    engine_part = f"aider says:\n{forged}\n# orchestrator: exit 0 after 1.0s\n"
    log.write_text(
        engine_part + f"# $ python -m orchestrator.stages.engine_workspace commit\n{genuine}\n"
    )
    start = len(engine_part.encode())
    found = _summary(log, start)
    assert found is not None and found.committed == ("greeting.py",)
    log.write_text(engine_part + "# orchestrator: exit 0 after 0.3s\n")
    assert _summary(log, start) is None


def test_a_name_that_is_not_utf8_is_committed_as_it_is(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"app.py": "x = 1\n"})
    clone = Path(repo.working_dir)
    (clone / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    (clone / os.fsdecode(b".aider.\xff")).write_text("its own\n")

    made, summary = commit(opened(repo), "Ticket T-1", "feature")

    assert made == ["Ticket T-1"]
    names = repo.git.ls_tree("-r", "-z", "--name-only", "HEAD", stdout_as_string=False)
    assert set(names.split(b"\0")) - {b""} == {b"app.py", b"caf\xe9.txt"}
    assert summary.left_out == (os.fsdecode(b".aider.\xff"),)
    assert "\\udce9" in summary_line(summary)  # one line of JSON, whatever the name


def test_the_record_keeps_any_name_as_text_bounded() -> None:
    from datetime import UTC, datetime

    from orchestrator.domain.runs import Attempt, AttemptStatus

    attempt = Attempt(
        number=1,
        stage="implement",
        status=AttemptStatus.FINISHED,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        committed_paths=(os.fsdecode(b"caf\xe9.txt"), "x" * 400),
        committed_count=2,
        left_out_paths=tuple(f".aider.{i}" for i in range(70)),
        left_out_count=70,
    )
    again = Attempt.model_validate_json(attempt.model_dump_json())  # a name is never a crash
    assert again.committed_paths == ("caf\ufffd.txt", "x" * 300)
    assert len(again.left_out_paths) == 50 and again.left_out_count == 70
