"""Reading an issue comment as an answer to a paused run: only a whole first line that is
the command counts; quotes, code, hidden characters and overlong text never do."""

from __future__ import annotations

import pytest

from orchestrator.domain.comment_commands import (
    MAX_REASON_CHARS,
    CommentCommand,
    bot_name,
    parse_command,
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/orchestrator approve", CommentCommand(approved=True)),
        ("/orchestrator approve\n\nLooks right to me.", CommentCommand(approved=True)),
        ("/orchestrator approve 2", CommentCommand(approved=True, verdict=2)),
        ("/orchestrator  approve \r\nthanks", CommentCommand(approved=True)),
        (
            "/orchestrator reject the test is wrong, not the code",
            CommentCommand(approved=False, reason="the test is wrong, not the code"),
        ),
    ],
)
def test_a_command_on_the_first_line_is_read(body: str, expected: CommentCommand) -> None:
    assert parse_command(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        "LGTM /orchestrator approve",
        "/orchestrator approve please",
        "/orchestrator approve 0",
        "/orchestrator approve 12345",
        "/orchestrator approve -1",
        "/Orchestrator approve",
        "/orchestratorapprove",
        " /orchestrator approve",  # indented: not the line's start
        "    /orchestrator approve",  # a markdown code block
        "> /orchestrator approve",
        ">/orchestrator approve",
        "```\n/orchestrator approve\n```",
        "`/orchestrator approve`",
        "thanks!\n/orchestrator approve",  # not the first line
        "> quoted\n\n/orchestrator approve",
        "/orchestrator reject",
        "/orchestrator reject   ",
        "/orchestrator reject\nbecause",
        "/orchestrator approve\u202e",  # a bidi override
        "/orchestrator approve\n\u2066hidden\u2069",  # anywhere in the comment
        "/orchestrator\u200b approve",  # zero-width space
        "\ufeff/orchestrator approve",
        "/orchestrator approve\x00",
        "/orchestrator approve\n\x1b[2K",  # a terminal escape
        "/orchestrator reject " + "x" * (MAX_REASON_CHARS + 1),
        "/orchestrator\u00a0approve",  # a no-break space is not a space here
        "/orchestrator approve\u2028rest",  # a line separator that is no newline
    ],
)
def test_anything_else_is_no_command(body: str) -> None:
    assert parse_command(body) is None


def test_an_overlong_comment_is_not_read_at_all() -> None:
    assert parse_command("/orchestrator approve\n" + "x" * 100, _max_chars=50) is None
    assert parse_command("/orchestrator approve\n" + "x" * 10, _max_chars=50) is not None


def test_a_reason_keeps_its_words_and_nothing_after_the_first_line() -> None:
    command = parse_command("/orchestrator reject flaky: see #12   \n> /orchestrator approve")
    assert command == CommentCommand(approved=False, reason="flaky: see #12")


@pytest.mark.parametrize(
    ("kind", "name", "bot"),
    [
        ("github", "github-actions[bot]", True),
        ("github", "dependabot[BOT]", True),
        ("github", "evil[bot]", True),
        ("github", "bot", False),
        ("github", "robot-bob", False),
        ("github", "evil-bot", False),
        ("github", "[bot]evil", False),
        ("gitlab", "project_42_bot_5f3a9c0e", True),
        ("gitlab", "group_7_bot_ab12", True),
        ("gitlab", "project_42_bot3", True),
        ("gitlab", "project_42_bot", True),
        ("gitlab", "myproject_42_bot_ab", False),
        ("gitlab", "project_x_bot_ab", False),
        ("gitlab", "robot", False),
        ("gitlab", "evil[bot]", False),  # no GitLab name; GitLab's own word decides
        ("local", "x[bot]", False),
    ],
)
def test_the_names_forges_give_accounts_no_person_holds(kind: str, name: str, bot: bool) -> None:
    assert bot_name(kind, name) is bot
