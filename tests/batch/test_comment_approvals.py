"""Approval by issue comment (issue 28), end to end through ``orchestrator batch`` against
the loopback fake GitHub and GitLab: a run paused for a person is answered by a comment
from an account with write access, asked of the forge when the comment is read; a
stranger's or an edited comment is refused and recorded, and nothing is answered; a
reject ends the run as a shell ``reject`` does; no comment is weighed twice."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest

from orchestrator.app import comment_approvals
from orchestrator.app.ledger_link import ledger_for
from orchestrator.cli.commands.batch import batch
from orchestrator.cli.commands.show import show
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage import FileStorage
from orchestrator.storage.approvals import read_approval

from conftest import COUNTS
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab
from support.gitlab_fake import TOKEN as GITLAB_TOKEN
from support.gitlab_fake import gitlab_server as gitlab  # noqa: F401  (the fixture)
from support.harness import reply
from support.leaks import assert_not_leaked

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-1"
# Fails its first run only: the model says "retry", which waits for a person.
FLAKY = (
    f"n=$(cat {COUNTS}/build.n 2>/dev/null || echo 0); echo $((n+1)) > {COUNTS}/build.n; "
    'echo "attempt $((n+1))"; [ "$n" -ge 1 ]'
)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def write_config(tmp_path: Path, source: str) -> Path:
    git.Repo.init(tmp_path / "origin.git", bare=True).close()
    (tmp_path / "counts").mkdir()
    (tmp_path / "tickets").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nmax_diag_invocations_per_ticket = 2\n'
        f"max_retries_per_ticket = 2\n\n[[sources]]\n{source}\n"
        + '[[stages]]\nname = "clone"\ncwd = "run"\ncommand = ["git", "init", "-q", "clone"]\n\n'
        + f'[[stages]]\nname = "build"\ncommand = ["bash", "-c", {json.dumps(FLAKY)}]\n'
        + f'writable = ["{COUNTS}"]\n\n'
    )
    return config


def github_config(tmp_path: Path, fake: FakeGitHub) -> Path:
    return write_config(tmp_path, (
        f'kind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\napi_url = "{fake.url}"\n'
        f'token_env = "FAKE_GH_TOKEN"\nrepository = "{tmp_path / "origin.git"}"\n'
    ))  # fmt: skip


def run_batch(config: Path, gateway: ScriptedGateway) -> str:
    out = io.StringIO()
    environ = {"PATH": os.environ["PATH"], "HOME": str(config.parent),
               "FAKE_GH_TOKEN": TOKEN, "FAKE_GL_TOKEN": GITLAB_TOKEN}  # fmt: skip
    batch(
        config, None, config.parent / "tickets", jobs=1, as_json=False, worker=False,
        out=out, environ=environ, stderr=out, preflight=False,
        gateway_factory=lambda: gateway,
    )  # fmt: skip
    return out.getvalue()


def paused_run(tmp_path: Path, config: Path, ticket_id: str) -> tuple[str, datetime]:
    """The first batch: the ticket's run waits for a person; its id and when it asked."""
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "flaky build"})])
    out = run_batch(config, gateway)
    storage = FileStorage(tmp_path / "state")
    record = storage.runs.latest_for_ticket(ticket_id)
    assert record is not None and record.state is RunState.AWAITING_APPROVAL, out
    verdict = storage.runs.verdict_path(record.run_id, 1)
    asked = datetime.fromisoformat(json.loads(verdict.read_text())["created_at"])
    return record.run_id, asked


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def comment(fake: FakeGitHub, body: str, login: str, at: datetime, *,
            edited: bool = False) -> dict[str, Any]:  # fmt: skip
    made = fake.add_comment(REPO, 1, body, login)
    made["created_at"] = stamp(at)
    made["updated_at"] = stamp(at + timedelta(minutes=5) if edited else at)
    return made


def comment_rows(tmp_path: Path) -> list[dict[str, Any]]:
    rows = ledger_for(tmp_path / "state", {}).rows()
    return [r for r in rows if r["capability"] == "answer-by-comment"]


def state_of(tmp_path: Path, run_id: str) -> Any:
    return FileStorage(tmp_path / "state").runs.load(run_id)


def no_more_answers() -> ScriptedGateway:
    return ScriptedGateway([])  # a model call now would fail the test


@pytest.mark.slow
def test_a_collaborators_approval_resumes_the_run_in_the_next_batch(
    tmp_path: Path, github: FakeGitHub
) -> None:
    github.add_issue(REPO, 1, "deal() is off by one", "Steps…", ("orchestrate",))
    config = github_config(tmp_path, github)
    run_id, asked = paused_run(tmp_path, config, TICKET)
    github.permissions[REPO] = {"alice": "write"}
    comment(github, "/orchestrator approve", "alice", asked - timedelta(minutes=1))  # before
    comment(github, "LGTM, but let me look first", "alice", asked + timedelta(minutes=1))
    approved = comment(github, "/orchestrator approve\n\nflaky, yes", "alice",
                       asked + timedelta(minutes=2))  # fmt: skip

    out = run_batch(config, no_more_answers())

    assert (
        f"{TICKET}: verdict 1 of {run_id} approved by github:alice ({approved['html_url']})" in out
    )
    record = state_of(tmp_path, run_id)
    assert record.state is RunState.COMPLETED, out
    approval = read_approval(FileStorage(tmp_path / "state").layout.approval_path(run_id, 1))
    assert approval is not None and approval.approved and approval.by == "github:alice"
    assert approval.comment_url == approved["html_url"] and approval.hmac is not None
    [row] = comment_rows(tmp_path)
    assert row["decision"]["by"] == "github:alice" and not row["decision"]["refused"]
    assert row["decision"]["comment_url"] == approved["html_url"]
    asked_about = [r.path for r in github.requests if r.path.endswith("/permission")]
    assert asked_about == [f"/repos/{REPO}/collaborators/alice/permission"]

    again = run_batch(config, no_more_answers())  # nothing re-applied, nothing re-recorded

    assert len(comment_rows(tmp_path)) == 1 and "approved by" not in again
    assert_no_token(tmp_path, out + again)


@pytest.mark.slow
def test_a_strangers_and_an_edited_comment_are_refused_and_a_reject_ends_the_run(
    tmp_path: Path, github: FakeGitHub
) -> None:
    github.add_issue(REPO, 1, "deal() is off by one", "Steps…", ("orchestrate",))
    config = github_config(tmp_path, github)
    run_id, asked = paused_run(tmp_path, config, TICKET)
    github.permissions[REPO] = {"alice": "write", "tim": "triage"}
    stranger = comment(github, "/orchestrator approve", "mallory", asked + timedelta(minutes=1))
    triager = comment(github, "/orchestrator approve", "tim", asked + timedelta(minutes=2))
    edited = comment(github, "/orchestrator approve", "alice", asked + timedelta(minutes=3),
                     edited=True)  # fmt: skip

    out = run_batch(config, no_more_answers())

    assert (f"comment {stranger['html_url']} by github:mallory refused: github:mallory has "
            f"no write access to {REPO}; nothing was answered") in out  # fmt: skip
    assert f"comment {triager['html_url']} by github:tim refused" in out
    assert (f"comment {edited['html_url']} by github:alice refused: it was edited after it "
            "was written") in out  # fmt: skip
    assert state_of(tmp_path, run_id).state is RunState.AWAITING_APPROVAL
    assert not FileStorage(tmp_path / "state").layout.approval_path(run_id, 1).exists()
    rows = comment_rows(tmp_path)
    assert [(r["decision"]["by"], r["decision"]["refused"]) for r in rows] == [
        ("github:mallory", True),
        ("github:tim", True),
        ("github:alice", True),
    ]
    assert rows[0]["decision"]["comment_url"] == stranger["html_url"]

    comment(github, "/orchestrator reject the test is wrong, not the code", "alice",
            asked + timedelta(minutes=4))  # fmt: skip
    out = run_batch(config, no_more_answers())

    record = state_of(tmp_path, run_id)
    assert record.state is RunState.NEEDS_HUMAN, out
    assert record.halt is not None and record.halt.reason is HaltReason.HUMAN_REJECTED
    assert "rejected by github:alice: the test is wrong, not the code" in record.halt.detail
    assert len(comment_rows(tmp_path)) == 4
    assert run_batch(config, no_more_answers()).count("refused") == 0
    assert len(comment_rows(tmp_path)) == 4


@pytest.mark.slow
def test_gitlab_a_developers_note_approves_a_reporters_is_refused(
    tmp_path: Path,
    gitlab: FakeGitLab,  # noqa: F811
) -> None:
    gitlab.add_issue(PROJECT, "deal() is off by one", ["orchestrate"], "2026-01-01T00:00:00Z")
    config = write_config(tmp_path, (
        f'kind = "gitlab"\nproject = "{PROJECT}"\nlabel = "orchestrate"\n'
        f'base_url = "{gitlab.base_url}"\ntoken_env = "FAKE_GL_TOKEN"\n'
        f'repository = "{tmp_path / "origin.git"}"\n'
    ))  # fmt: skip
    gitlab.users.update({"dev": 7, "rep": 8})
    gitlab.projects[PROJECT]["members"].update({7: 30, 8: 20})
    run_id, asked = paused_run(tmp_path, config, f"gl-{PROJECT.replace('/', '-')}-1")
    gitlab.add_note(
        PROJECT, 1, "changed the label", "dev", stamp(asked + timedelta(1)), system=True
    )
    rep = gitlab.add_note(PROJECT, 1, "/orchestrator approve", "rep",
                          stamp(asked + timedelta(minutes=1)))  # fmt: skip
    edited = gitlab.add_note(PROJECT, 1, "/orchestrator reject no", "dev",
                             stamp(asked + timedelta(minutes=1)))  # fmt: skip
    edited["last_edited_at"] = stamp(asked + timedelta(minutes=3))
    dev = gitlab.add_note(PROJECT, 1, "/orchestrator approve 1", "dev",
                          stamp(asked + timedelta(minutes=2)))  # fmt: skip

    out = run_batch(config, no_more_answers())

    issue_url = f"{gitlab.base_url}/{PROJECT}/-/issues/1"
    assert (f"comment {issue_url}#note_{rep['id']} by gitlab:rep refused: gitlab:rep has no "
            f"write access to {PROJECT}") in out  # fmt: skip
    assert f"#note_{edited['id']} by gitlab:dev refused: it was edited after it was written" in out
    assert f"approved by gitlab:dev ({issue_url}#note_{dev['id']})" in out
    assert state_of(tmp_path, run_id).state is RunState.COMPLETED, out
    assert [r["decision"]["refused"] for r in comment_rows(tmp_path)] == [True, True, False]


def assert_no_token(tmp_path: Path, output: str) -> None:
    assert_not_leaked([TOKEN, GITLAB_TOKEN], output, tmp_path / "state")


class Killed(BaseException):
    """The process dying: nothing in the batch handles it (it is no ``Exception``)."""


@pytest.mark.slow
def test_a_batch_killed_between_the_answer_and_its_ledger_row_is_resumed_once(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    github.add_issue(REPO, 1, "deal() is off by one", "Steps…", ("orchestrate",))
    config = github_config(tmp_path, github)
    run_id, asked = paused_run(tmp_path, config, TICKET)
    github.permissions[REPO] = {"alice": "write"}
    approved = comment(github, "/orchestrator approve", "alice", asked + timedelta(minutes=1))
    real_record = comment_approvals.person_decision

    def dies(**row: Any) -> Any:  # the approval file is written; its row never is
        monkeypatch.setattr(comment_approvals, "person_decision", real_record)
        raise Killed

    monkeypatch.setattr(comment_approvals, "person_decision", dies)
    with pytest.raises(Killed):
        run_batch(config, no_more_answers())
    approval_path = FileStorage(tmp_path / "state").layout.approval_path(run_id, 1)
    assert approval_path.exists() and comment_rows(tmp_path) == []
    assert state_of(tmp_path, run_id).state is RunState.AWAITING_APPROVAL

    out = run_batch(config, no_more_answers())

    assert (f"{TICKET}: verdict 1 of {run_id} approved by github:alice ({approved['html_url']}); "
            "its answer was written by an earlier batch that stopped before its ledger row"
            ) in out  # fmt: skip
    assert "refused" not in out
    (row,) = comment_rows(tmp_path)
    assert row["decision"]["refused"] is False and row["decision"]["by"] == "github:alice"
    assert row["decision"]["comment_url"] == approved["html_url"]
    assert state_of(tmp_path, run_id).state is RunState.COMPLETED, out
    again = run_batch(config, no_more_answers())
    assert len(comment_rows(tmp_path)) == 1 and "approved by" not in again
    assert_no_token(tmp_path, out + again)


@pytest.mark.slow
def test_a_bots_approval_is_refused_whatever_its_permission_a_persons_is_not(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """Issue 40: an app's account (``github-actions[bot]``, or any account GitHub types
    "Bot") may hold write access; its approval is refused and recorded all the same, and
    what the forge says of the account decides, never the comment's text."""
    github.add_issue(REPO, 1, "deal() is off by one", "Steps…", ("orchestrate",))
    config = github_config(tmp_path, github)
    run_id, asked = paused_run(tmp_path, config, TICKET)
    github.permissions[REPO] = {
        "github-actions[bot]": "write", "deployer": "admin", "Evil[BOT]": "admin",
        "bot": "write",
    }  # fmt: skip
    actions = comment(github, "/orchestrator approve", "github-actions[bot]",
                      asked + timedelta(minutes=1))  # fmt: skip
    typed_bot = github.add_comment(REPO, 1, "/orchestrator approve\n\ntype: User, a person",
                                   "deployer", account_type="Bot")  # fmt: skip
    named_bot = github.add_comment(REPO, 1, "/orchestrator approve", "Evil[BOT]",
                                   account_type="User")  # fmt: skip
    for made, minutes in ((typed_bot, 2), (named_bot, 3)):
        made["created_at"] = made["updated_at"] = stamp(asked + timedelta(minutes=minutes))

    out = run_batch(config, no_more_answers())

    assert (f"comment {actions['html_url']} by github:github-actions[bot] refused: "
            "github:github-actions[bot] is no person (its login is a bot's ([bot])); approvals "
            "come from people only; nothing was answered") in out  # fmt: skip
    assert (f"comment {typed_bot['html_url']} by github:deployer refused: github:deployer is "
            "no person (GitHub says its account is no user (type Bot or another))") in out  # fmt: skip
    assert f"comment {named_bot['html_url']} by github:Evil[BOT] refused" in out
    assert state_of(tmp_path, run_id).state is RunState.AWAITING_APPROVAL
    assert not FileStorage(tmp_path / "state").layout.approval_path(run_id, 1).exists()
    rows = comment_rows(tmp_path)
    assert [(r["decision"]["by"], r["decision"]["refused"]) for r in rows] == [
        ("github:github-actions[bot]", True),
        ("github:deployer", True),
        ("github:Evil[BOT]", True),
    ]
    assert all("approvals come from people only" in r["decision"]["why"] for r in rows)
    assert not [r for r in github.requests if r.path.endswith("/permission")]
    shown = io.StringIO()
    show(tmp_path / "state", run_id, shown, environ={})  # what the operator reads
    assert (
        "comments (answers given on the issue)\n"
        "  github:github-actions[bot]: approve verdict 1: refused: github:github-actions[bot] "
        "is no person (its login is a bot's ([bot])); approvals come from people only\n"
        f"      {actions['html_url']}\n"
    ) in shown.getvalue()

    person = comment(github, "/orchestrator approve", "bot", asked + timedelta(minutes=4))
    out = run_batch(config, no_more_answers())

    assert f"approved by github:bot ({person['html_url']})" in out
    assert state_of(tmp_path, run_id).state is RunState.COMPLETED, out
    assert [r["decision"]["refused"] for r in comment_rows(tmp_path)] == [True, True, True, False]


def test_gitlab_an_access_tokens_or_a_bot_accounts_note_is_refused(
    tmp_path: Path,
    gitlab: FakeGitLab,  # noqa: F811
) -> None:
    """GitLab's notes do not say whether their author is a bot: the account is asked
    (``GET /users/:id``), and an access token's user is known by its name as well."""
    gitlab.add_issue(PROJECT, "deal() is off by one", ["orchestrate"], "2026-01-01T00:00:00Z")
    config = write_config(tmp_path, (
        f'kind = "gitlab"\nproject = "{PROJECT}"\nlabel = "orchestrate"\n'
        f'base_url = "{gitlab.base_url}"\ntoken_env = "FAKE_GL_TOKEN"\n'
        f'repository = "{tmp_path / "origin.git"}"\n'
    ))  # fmt: skip
    token_bot = "project_42_bot_5f3a9c0e"
    gitlab.users.update({"dev": 7, "helper": 9, token_bot: 10})
    gitlab.bots.add("helper")
    gitlab.projects[PROJECT]["members"].update({7: 30, 9: 50, 10: 40})
    run_id, asked = paused_run(tmp_path, config, f"gl-{PROJECT.replace('/', '-')}-1")
    helper = gitlab.add_note(PROJECT, 1, "/orchestrator approve", "helper",
                             stamp(asked + timedelta(minutes=1)))  # fmt: skip
    token = gitlab.add_note(PROJECT, 1, "/orchestrator approve", token_bot,
                            stamp(asked + timedelta(minutes=2)))  # fmt: skip

    out = run_batch(config, no_more_answers())

    issue_url = f"{gitlab.base_url}/{PROJECT}/-/issues/1"
    assert (f"comment {issue_url}#note_{helper['id']} by gitlab:helper refused: gitlab:helper "
            "is no person (GitLab says its account is a bot); approvals come from people "
            "only") in out  # fmt: skip
    assert (f"#note_{token['id']} by gitlab:{token_bot} refused: gitlab:{token_bot} is no "
            "person (its username is an access token's bot user's)") in out  # fmt: skip
    assert state_of(tmp_path, run_id).state is RunState.AWAITING_APPROVAL
    dev = gitlab.add_note(PROJECT, 1, "/orchestrator approve", "dev",
                          stamp(asked + timedelta(minutes=3)))  # fmt: skip

    out = run_batch(config, no_more_answers())

    assert f"approved by gitlab:dev ({issue_url}#note_{dev['id']})" in out
    assert state_of(tmp_path, run_id).state is RunState.COMPLETED, out
    assert [(r["decision"]["by"], r["decision"]["refused"]) for r in comment_rows(tmp_path)] == [
        ("gitlab:helper", True), (f"gitlab:{token_bot}", True), ("gitlab:dev", False),
    ]  # fmt: skip


def test_the_approvals_forge_waits_a_rate_limit_out_for_the_configured_time_at_most() -> None:
    # [recovery] forge_max_wait_s reaches the forge the comments are read from (issue 43).
    from orchestrator.domain.sources import GitHubSource, GitLabSource

    environ = {"GITHUB_TOKEN": "t", "GITLAB_TOKEN": "t"}
    for source in (
        GitHubSource(kind="github", repo="o/r", label="go"),
        GitLabSource(kind="gitlab", project="g/p", label="go", base_url="https://gl.example"),
    ):
        threads = comment_approvals.threads_for(source, environ, 7.0)
        assert getattr(threads, "_forge")._max_wait_s == 7.0  # noqa: B009 - the forge's own slot
