"""The status comment's text, per run state: marker first, what a reader of the issue
needs (the pull request, what is asked and how to answer, the hand-off), redacted."""

from __future__ import annotations

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Halt
from orchestrator.domain.status_comments import (
    MAX_QUOTE,
    StatusFacts,
    is_status_of,
    marker,
    status_body,
)

from support.notify_fixtures import halt, run_record, verdict

RUN = "`T-1-20261201T030405Z-abcd`"


def test_the_marker_names_the_ticket_and_only_a_first_line_counts() -> None:
    assert marker("gh-octo-widgets-7") == "<!-- orchestrator:status ticket=gh-octo-widgets-7 -->"
    body = status_body(run_record())
    assert is_status_of(body, "T-1")
    assert not is_status_of(body, "T-12")
    assert not is_status_of(f"quoting:\n{body}", "T-1")


def test_started() -> None:
    body = status_body(run_record(RunState.RUNNING, current_stage="build"))
    assert body == f"{marker('T-1')}\n**Started** (run {RUN}, at `build`).\n"
    assert status_body(run_record(RunState.PENDING)).endswith(f"**Started** (run {RUN}).\n")


def test_completed_links_the_pull_request() -> None:
    facts = StatusFacts(pull_request_url="https://github.com/octo/widgets/pull/9")
    assert status_body(run_record(RunState.COMPLETED), facts) == (
        f"{marker('T-1')}\n**Completed** (run {RUN}).\n\n"
        "Pull request: https://github.com/octo/widgets/pull/9\n"
    )


def test_awaiting_approval_says_what_is_asked_and_how_to_answer() -> None:
    record = run_record(RunState.AWAITING_APPROVAL, verdicts=(verdict(1, "approved"), verdict(2)))
    body = status_body(record, StatusFacts(asked="retry the build: the mirror flaked"))
    assert body == (
        f"{marker('T-1')}\n**Waiting for approval** (run {RUN}).\n\n"
        "Asked: decision 2, `retry`:\n\n"
        "```text\nretry the build: the mirror flaked\n```\n\n"
        "Answer with a comment whose first line is one of:\n\n"
        "    /orchestrator approve\n    /orchestrator reject <reason>\n\n"
        "or on the orchestrator's host: `orchestrator approve T-1-20261201T030405Z-abcd` / "
        "`orchestrator reject T-1-20261201T030405Z-abcd --reason ...`\n"
    )


def test_needs_a_person_quotes_the_hand_off_redacted_and_bounded() -> None:
    secret = "sk-ant-api03-" + "A" * 40
    handoff = f"# Hand-off\nThe build fails; key {secret}\n" + "x" * 5000
    body = status_body(run_record(RunState.NEEDS_HUMAN, halt=halt()), StatusFacts(handoff=handoff))
    assert body.startswith(
        f"{marker('T-1')}\n**Needs a person** (run {RUN}).\n\n"
        "Halted: `check_failed` at `a`.\n\nHand-off:\n\n```text\n# Hand-off\nThe build fails; key "
    )
    assert secret not in body
    assert len(body) < MAX_QUOTE + 400
    assert body.endswith("…\n```\n")


def test_failed_without_a_hand_off_quotes_the_halt() -> None:
    stop = Halt(reason=HaltReason.STAGE_FAILED, stage=None, detail="clone: no such repo")
    assert status_body(run_record(RunState.FAILED, halt=stop)) == (
        f"{marker('T-1')}\n**Failed** (run {RUN}).\n\nHalted: `stage_failed`.\n\n"
        "```text\nclone: no such repo\n```\n"
    )


def test_split_names_the_sub_tickets() -> None:
    body = status_body(run_record(RunState.SPLIT, sub_tickets=("T-1a", "T-1b")))
    assert body.endswith(f"**Split** into sub-tickets (run {RUN}): `T-1a`, `T-1b`.\n")
