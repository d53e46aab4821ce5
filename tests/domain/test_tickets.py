from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator.domain.errors import TicketError
from orchestrator.domain.tickets import (
    TicketFields,
    TicketKind,
    load_ticket,
    local_repository_problem,
    render_ticket,
)

from conftest import ROOT, examples, subprocess_env, write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.scripted_cli import run_forked


def refusal(path: Path) -> str:
    with pytest.raises(TicketError) as info:
        load_ticket(path)
    return str(info.value)


def test_valid_ticket(tmp_path: Path) -> None:
    (tmp_path / "fix.patch").write_text("From x\n")
    path = write_ticket(
        tmp_path,
        "CARDS-1",
        kind="bug-fix",
        extra='[extras.patch]\nfile = "fix.patch"\n[extras.claude-code]\nmax_turns = 5\n',
        body="# Deal is short by one\n\nFix it.",
    )
    ticket = load_ticket(path)
    assert ticket.id == "CARDS-1"
    assert ticket.fields.kind is TicketKind.BUG_FIX
    assert ticket.fields.base_branch == "main"
    assert ticket.body == "# Deal is short by one\n\nFix it."
    assert ticket.repository_location() == str((tmp_path / "../origin.git").resolve())
    assert ticket.extra_files() == [tmp_path / "fix.patch"]
    assert ticket.fields.extras["claude-code"] == {"max_turns": 5}
    assert len(ticket.sha256) == 64


def test_url_repository_is_kept_as_written(tmp_path: Path) -> None:
    path = write_ticket(tmp_path, repository="https://example.invalid/x.git")
    assert load_ticket(path).repository_location() == "https://example.invalid/x.git"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("id = 1\n", "missing TOML front matter: the first line must be '+++'"),
        ('+++\nid = "X"\n', "unterminated front matter: no closing '+++' line"),
        ("+++\nid = \n+++\nbody\n", "invalid TOML in front matter: "),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "bugfix"\nrepository = "r"\n+++\nbody\n',
            "kind: Input should be 'bug-fix', 'feature', 'refactor', 'chore', 'docs' or 'test' (got 'bugfix')",
        ),
        (
            '+++\ntitle = "t"\nkind = "feature"\nrepository = "r"\n+++\nbody\n',
            "id: required key is missing",
        ),
        (
            '+++\nid = "../../etc"\ntitle = "t"\nkind = "feature"\nrepository = "r"\n+++\nbody\n',
            "id: String should match pattern",
        ),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "feature"\nrepository = "r"\npriority = 1\n+++\nbody\n',
            "priority: unknown key (not allowed here)",
        ),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "feature"\nrepository = "r"\n+++\n\n  \n',
            "body: the ticket has no text after the front matter",
        ),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "feature"\nrepository = "r"\n[extras.patch]\nfile = "nope.patch"\n+++\nbody\n',
            "extras.patch.file: no such file: ",
        ),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "feature"\nrepository = "r"\n[extras.patch]\nfiel = "p"\n+++\nbody\n',
            "extras.patch.file: required key is missing; extras.patch.fiel: unknown key (not allowed here)",
        ),
        (
            '+++\nid = "X"\ntitle = "t"\nkind = "feature"\nrepository = "r"\n[extras.patch]\nfile = "../secret"\n+++\nbody\n',
            "extras.patch.file: '../secret' points outside the ticket's directory",
        ),
    ],
)
def test_malformed_tickets_are_refused_with_file_field_and_reason(
    tmp_path: Path, content: str, reason: str
) -> None:
    path = tmp_path / "bad.md"
    path.write_text(content)
    message = refusal(path)
    assert message.startswith(f"ticket error: {path}: ")
    assert reason in message


def test_missing_and_binary_ticket_files(tmp_path: Path) -> None:
    assert refusal(tmp_path / "nope.md") == f"ticket error: {tmp_path / 'nope.md'}: no such file"
    binary = tmp_path / "bin.md"
    binary.write_bytes(b"+++\n\xff\xfe\n")
    assert refusal(binary).startswith(f"ticket error: {binary}: not UTF-8 text")


@pytest.mark.slow
def test_cli_refuses_a_malformed_ticket_and_creates_no_state(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text((ROOT / "config.toml").read_text().replace("{root}", str(ROOT)))
    bad = tmp_path / "bad.md"
    bad.write_text('+++\nid = "X"\ntitle = "t"\nkind = "bugfix"\nrepository = "r"\n+++\nbody\n')
    proc = run_forked(  # its own process, forked as `python -m orchestrator` starts
        Path.cwd(), ["--config", str(config), "run", str(bad)], subprocess_env(), as_entry=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"ticket error: {bad}: kind: Input should be 'bug-fix'")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / ".state").exists()


@pytest.mark.parametrize(
    "title",
    [
        "deal() hands out one card too few",
        "Fix the 🎉 emoji and the ünïcode",
        "She said \"no\" and 'yes'",
        "a \\ backslash, a tab\tand\na newline",
        "+++",
        'title = "injected"\nkind = "docs"',
    ],
)
def test_a_rendered_ticket_reads_back_as_written(tmp_path: Path, title: str) -> None:
    fields = TicketFields(
        id="CARDS-1.1", title=title, kind=TicketKind.BUG_FIX, repository="../origin.git",
        parent="CARDS-1",
    )  # fmt: skip
    path = tmp_path / "CARDS-1.1.md"
    path.write_text(render_ticket(fields, "The body.\n+++\nstill the body."))
    ticket = load_ticket(path)
    assert ticket.fields == fields
    assert ticket.body == "The body.\n+++\nstill the body."


def test_rendering_keeps_extras_and_refuses_an_empty_body(tmp_path: Path) -> None:
    (tmp_path / "fix.patch").write_text("diff\n")
    fields = TicketFields(
        id="T-2", title="t", kind=TicketKind.FEATURE, repository="r",
        extras={"patch": {"file": "fix.patch"}},
    )  # fmt: skip
    path = tmp_path / "T-2.md"
    path.write_text(render_ticket(fields, "b"))
    assert load_ticket(path).fields == fields
    with pytest.raises(ValueError, match="a ticket needs a body"):
        render_ticket(fields, " \n")


# Line breaks Python's str.splitlines knows beyond "\n", control characters the TOML writer
# must escape, and the fence itself: what a sub-ticket's title and body may hold.
TRICKY = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
          "\u2029", "\x00", "\x7f", "\t", "+++", '"', "'", "\\", "=", "[", "]", "#"]  # fmt: skip
unicode_text = st.lists(st.characters(codec="utf-8") | st.sampled_from(TRICKY), max_size=40).map(
    "".join
)  # surrogate-free: a file holds UTF-8


# Slow tier: a full run of examples is what the 10 s guard caught beside a full suite's
# heaviest neighbours (two such tests at 11-12 s there, about a second alone); the edit
# loop draws a fifth of them.
@pytest.mark.slow
@pytest.mark.quick
@settings(max_examples=examples(300), deadline=None)
@given(
    title=unicode_text.filter(lambda t: 1 <= len(t) <= 200),
    body=unicode_text.filter(lambda b: b.strip() != ""),
)
# Found by the parametrized test below: a fence between line breaks TOML leaves raw.
@example(title="a\u2028+++\u2028b", body="\u2029+++\x85body\r")
def test_any_unicode_title_and_body_round_trip_through_the_ticket_loader(
    tmp_path_factory: pytest.TempPathFactory, title: str, body: str
) -> None:
    fields = TicketFields(
        id="CARDS-1.1", title=title, kind=TicketKind.BUG_FIX, repository="../origin.git",
        parent="CARDS-1",
    )  # fmt: skip
    path = tmp_path_factory.mktemp("sub") / "CARDS-1.1.md"
    path.write_bytes(render_ticket(fields, body).encode("utf-8"))
    ticket = load_ticket(path)
    assert ticket.fields == fields
    # The body as written, less the blank lines around it (the file's own framing).
    assert ticket.body == body.strip("\n")


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029", "\x1c", "\r"])
def test_a_title_with_a_fence_between_unusual_line_breaks_reads_back(
    tmp_path: Path, brk: str
) -> None:
    title = f"a{brk}+++{brk}kind = 'docs'"
    fields = TicketFields(id="T-3", title=title, kind=TicketKind.FEATURE, repository="r")
    path = tmp_path / "T-3.md"
    path.write_bytes(render_ticket(fields, "body").encode("utf-8"))
    assert load_ticket(path).fields.title == title


def test_a_local_repository_is_checked_without_running_git(tmp_path: Path) -> None:
    work = init_repo(tmp_path / "work")
    commit_files(work, {"a.txt": "a\n"}, "initial")
    bare = bare_clone(tmp_path / "work", tmp_path / "origin.git")
    work.git.worktree("add", str(tmp_path / "linked"), "-b", "side")  # its .git is a file
    (tmp_path / "plain").mkdir()
    (tmp_path / "file").write_text("x")
    assert local_repository_problem(tmp_path / "work") is None
    assert local_repository_problem(bare) is None
    assert local_repository_problem(tmp_path / "linked") is None
    assert (
        local_repository_problem(tmp_path / "plain")
        == f"not a git repository: {tmp_path / 'plain'}"
    )
    assert local_repository_problem(tmp_path / "file") == f"not a directory: {tmp_path / 'file'}"
    assert local_repository_problem(tmp_path / "gone") == f"no such directory: {tmp_path / 'gone'}"


@pytest.mark.parametrize(
    ("repository", "problem"),
    [
        ("https://example.invalid/nowhere.git", None),  # remote: the clone stage will tell
        ("https://x-access-token@example.invalid/r.git", None),  # a name, no password
        (
            "https://bob:s3cret-pw@example.invalid/r.git",
            "https://bob:***@example.invalid/r.git holds a password, which git would show on "
            "its command line to every user of this machine; leave it out and let git's "
            "credential helper or ssh give it (open-pr hands the forge's token to git that way)",
        ),
        ("git@example.invalid:nowhere.git", None),
        ("ssh://git@example.invalid/nowhere.git", None),
        ("../gone.git", "no such directory: {root}/gone.git"),
        ("file://{root}/gone.git", "no such directory: {root}/gone.git"),
        ("../origin.git", None),
    ],
)
def test_which_repositories_are_refused_before_a_run(
    tmp_path: Path, repository: str, problem: str | None
) -> None:
    path = write_ticket(tmp_path / "t", repository=repository.format(root=tmp_path))
    if repository.startswith("../gone"):
        # write_ticket makes a missing local origin; this one must stay missing.
        shutil.rmtree(tmp_path / "gone.git")
    ticket = load_ticket(path)
    expected = problem.format(root=tmp_path) if problem else None
    assert ticket.repository_problem() == expected
    refusal = ticket.refused_repository()
    if expected is None:
        assert refusal is None
    else:
        assert str(refusal) == f"ticket error: {path}: repository: {expected}; nothing was run"
