"""``[[notify]]`` targets as the config reads them, which event a run's state is, and
what each kind of target is posted: pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.notices import MAX_TEXT, Occasion, notice_of, occasion_of, payload_for
from orchestrator.domain.notify import NotifyEvent
from orchestrator.domain.runs import ResumeRecord

from support.notify_fixtures import AT, halt, run_record, verdict

STAGES = '[[stages]]\nname = "a"\ncommand = ["true"]\n'


def parse(text: str) -> object:
    return parse_config(text + STAGES, Path("/etc/orch.toml"))


def test_targets_read_with_every_event_by_default() -> None:
    config = parse(
        '[[notify]]\nkind = "slack"\nurl_env = "SLACK_URL"\n'
        '[[notify]]\nkind = "email"\nsmtp_host = "mail"\nfrom = "o@x.org"\nto = ["a@x.org"]\n'
        'events = ["failed", "needs-human"]\n'
    )
    slack, email = config.notify  # type: ignore[attr-defined]
    assert slack.events == tuple(NotifyEvent) and slack.name == "slack $SLACK_URL"
    assert email.events == (NotifyEvent.FAILED, NotifyEvent.NEEDS_HUMAN)
    assert (email.from_, email.smtp_port, email.starttls) == ("o@x.org", 587, True)
    assert email.name == "email to a@x.org"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('kind = "slack"\nurl = "https://hooks.slack.com/x"\n', "notify[0].url: unknown key"),
        ('kind = "slack"\n', "a slack target needs 'url_env'"),
        ('kind = "teams"\nurl_env = "https://x"\n', "notify[0].url_env: String should match"),
        ('kind = "pager"\nurl_env = "P"\n', "notify[0].kind: Input should be"),
        ('kind = "webhook"\nurl_env = "U"\nevents = ["started"]\n', "notify[0].events[0]"),
        ('kind = "webhook"\nurl_env = "U"\nevents = []\n', "notify[0].events: expected at least"),
        ('kind = "webhook"\nurl_env = "U"\nsmtp_host = "m"\n', "'smtp_host' only apply to email"),
        ('kind = "email"\nsmtp_host = "m"\nto = ["a@b.c"]\n', "an email target needs 'from'"),
        ('kind = "email"\nurl_env = "U"\n', "'url_env' is for webhook, slack and teams"),
        ('kind = "email"\nsmtp_host = "m"\nfrom = "a@b.c"\nto = ["nobody"]\n', "notify[0].to[0]"),
    ],
)
def test_target_errors_name_the_file_and_the_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse("[[notify]]\n" + text)
    assert str(info.value).startswith("config error: /etc/orch.toml: ")
    assert expected in str(info.value)


def test_the_event_is_the_state_a_person_is_told_about() -> None:
    assert occasion_of(run_record(RunState.RUNNING)) is None
    assert occasion_of(run_record(RunState.RECOVERING)) is None
    assert occasion_of(run_record(RunState.SPLIT)) is None
    assert occasion_of(run_record(RunState.COMPLETED)) == Occasion(NotifyEvent.COMPLETED, 0)
    assert occasion_of(run_record(RunState.FAILED, halt=halt())) == Occasion(NotifyEvent.FAILED, 0)
    # The decision asked about tells one approval request from the next.
    waiting = run_record(RunState.AWAITING_APPROVAL, verdicts=(verdict(1, "done"), verdict(2)))
    assert occasion_of(waiting) == Occasion(NotifyEvent.AWAITING_APPROVAL, 2)
    # A resumed run that halts again is another occasion.
    resumed = ResumeRecord(at=AT, by="me", from_state=RunState.NEEDS_HUMAN, stage="a")
    again = run_record(RunState.NEEDS_HUMAN, halt=halt(), resumes=(resumed,))
    assert occasion_of(again) == Occasion(NotifyEvent.NEEDS_HUMAN, 1)


def test_the_generic_notice_says_what_to_do_redacted_and_bounded() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    record = run_record(
        RunState.AWAITING_APPROVAL, verdicts=(verdict(1),),
        halt=None, handoff="/s/runs/x.handoff.md", pull_request=None,
    )  # fmt: skip
    notice = notice_of(record, Occasion(NotifyEvent.AWAITING_APPROVAL, 1))
    assert notice["event"] == "awaiting-approval" and notice["state"] == "awaiting-approval"
    assert notice["ticket"] == {"id": "T-1", "title": "Fix the thing"}
    assert notice["approval"] == {
        "verdict": 1, "action": "retry", "proposal": "/s/runs/x.verdict-1.json",
        "approve": f"orchestrator approve {record.run_id}",
        "reject": f"orchestrator reject {record.run_id} --reason ...",
    }  # fmt: skip
    halted = run_record(RunState.NEEDS_HUMAN, halt=halt(f"token={secret} " + "x" * 5000))
    said = notice_of(halted, Occasion(NotifyEvent.NEEDS_HUMAN, 0))
    assert secret not in str(said) and said["halt"]["reason"] == "check_failed"
    assert len(said["halt"]["detail"]) == MAX_TEXT


def test_slack_and_teams_payloads_carry_the_notice_as_text() -> None:
    record = run_record(RunState.FAILED, halt=halt(), pull_request="https://forge/pr/7")
    notice = notice_of(record, Occasion(NotifyEvent.FAILED, 0))
    assert payload_for("webhook", notice) is notice
    slack = payload_for("slack", notice)
    assert list(slack) == ["text", "unfurl_links", "unfurl_media"]
    assert slack["unfurl_links"] is slack["unfurl_media"] is False
    assert slack["text"].startswith("orchestrator: T-1 failed: Fix the thing\n")
    assert "pull request: https://forge/pr/7" in slack["text"]
    teams = payload_for("teams", notice)
    assert teams["@type"] == "MessageCard" and teams["@context"] == "https://schema.org/extensions"
    assert teams["summary"] == teams["title"] == "orchestrator: T-1 failed"
    assert "halt: check_failed at a: check 'tests' exited 1" in teams["text"]
    with pytest.raises(ValueError, match="no webhook payload for a email target"):
        payload_for("email", notice)
