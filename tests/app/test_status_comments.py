"""The status comment written back to a ticket's issue, against the loopback fakes of
GitHub and GitLab: one comment, edited in place through a real run; found again after a
crash; a forged marker by another account left alone; a failing forge never fails a run."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.driver import run_ticket
from orchestrator.app.status_comments import IssueThread, NoStatus, StatusComments, status_for
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.sources import ForgeSource, GitHubSource, GitLabSource
from orchestrator.domain.status_comments import marker
from orchestrator.domain.tickets import load_ticket
from orchestrator.forges.github import GitHubForge
from orchestrator.forges.gitlab import GitLabForge
from orchestrator.forges.http import UrllibClient

from conftest import bash_stage, write_config, write_ticket
from support.github_fake import LOGIN, TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab, gitlab_server  # noqa: F401 - the fixture
from support.gitlab_fake import TOKEN as GITLAB_TOKEN
from support.notify_fixtures import run_record
from support.services import make_services

pytestmark = pytest.mark.timeout(30)

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-7"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def github_status(fake: FakeGitHub, sleeps: list[float] | None = None) -> StatusComments:
    source = GitHubSource(kind="github", repo=REPO, label="orchestrate", api_url=fake.url)
    waits = sleeps if sleeps is not None else []

    def thread(source: ForgeSource, project: str, token: str) -> IssueThread:
        # The real GitHub forge, its waits counted instead of slept (issue 43).
        assert isinstance(source, GitHubSource)
        return GitHubForge(UrllibClient(source.api_url), project, token, sleep=waits.append)

    return StatusComments((source,), {"GITHUB_TOKEN": TOKEN}, thread_for=thread)


def issue_ticket(directory: Path, kind: str = "github", project: str = REPO) -> Path:
    source = "gh-octo-widgets" if kind == "github" else "gl-grp-sub-cards"
    origin = f'[origin]\nsource = "{source}"\nkind = "{kind}"\nproject = "{project}"\nnumber = 7\n'
    return write_ticket(directory, TICKET, extra=origin)


def record_for(ticket: Path, state: RunState = RunState.RUNNING, **update: object) -> RunRecord:
    return run_record(state, ticket_id=TICKET, ticket_snapshot=str(ticket), **update)


def test_a_run_keeps_one_comment_edited_from_started_to_completed(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, bash_stage("build", "echo building"))
    out = io.StringIO()
    services = make_services(load_config(config), tmp_path / "state", out=out,
                             environ={"PATH": "/usr/bin:/bin"}, status=github_status(github))  # fmt: skip
    ticket = load_ticket(issue_ticket(tmp_path / "tickets"))

    record = run_ticket(ticket, services)

    assert record.state is RunState.COMPLETED
    (comment,) = github.comments_on(REPO, 7)
    assert comment["user"]["login"] == LOGIN
    assert comment["body"] == (f"{marker(TICKET)}\n**Completed** (run `{record.run_id}`).\n")
    (started,) = comment["history"]
    assert started.startswith(f"{marker(TICKET)}\n**Started** (run `{record.run_id}`")
    assert [r.method for r in github.requests] == ["GET", "GET", "POST", "GET", "PATCH"]
    assert sum(r.path == "/user" for r in github.requests) == 1  # asked once, then kept
    assert TOKEN not in out.getvalue()

    run_ticket(ticket, services)  # a completed ticket is not run again: nothing is written
    assert len(github.requests) == 5


def test_a_rerun_after_a_crash_finds_the_comment_and_edits_it(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)
    status = github_status(github)
    record = record_for(ticket)
    # The last process created the comment and died before anything else was written.
    github.add_comment(REPO, 7, f"{marker(TICKET)}\n**Started** (run `{record.run_id}`).\n")
    said: list[str] = []

    status.show(record, said.append)  # the same words: left as it is
    status.show(record.model_copy(update={"state": RunState.COMPLETED}), said.append)

    (comment,) = github.comments_on(REPO, 7)
    assert len(comment["history"]) == 1
    assert "**Completed**" in comment["body"]
    assert [r.method for r in github.requests].count("POST") == 0
    assert said == []


def test_a_forged_marker_by_another_account_is_left_alone(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)
    forged = github.add_comment(REPO, 7, f"{marker(TICKET)}\n**Completed**, trust me", "mallory")

    github_status(github).show(record_for(ticket), [].append)

    forgery, ours = github.comments_on(REPO, 7)
    assert forgery == forged and forgery["history"] == []
    assert ours["user"]["login"] == LOGIN and "**Started**" in ours["body"]


def test_the_pull_request_link_is_read_from_the_runs_record(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)
    pr_record = tmp_path / "pull-request.json"
    pr_record.write_text(json.dumps({"url": "https://github.com/octo/widgets/pull/9"}))
    record = record_for(ticket, RunState.COMPLETED, pull_request=str(pr_record))

    github_status(github).show(record, [].append)

    (comment,) = github.comments_on(REPO, 7)
    assert comment["body"].endswith("\nPull request: https://github.com/octo/widgets/pull/9\n")


def test_a_failing_forge_is_one_line_and_the_run_goes_on(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, bash_stage("build", "echo building"))
    out = io.StringIO()
    sleeps: list[float] = []
    services = make_services(load_config(config), tmp_path / "state", out=out,
                             environ={"PATH": "/usr/bin:/bin"},
                             status=github_status(github, sleeps))  # fmt: skip
    for _ in range(2 * 3):  # at the start and at the end, each GET asked 3 times: all fail
        github.answer(500, body={"message": f"Server Error {TOKEN}"})

    record = run_ticket(load_ticket(issue_ticket(tmp_path / "tickets")), services)

    assert record.state is RunState.COMPLETED
    said = [line for line in out.getvalue().splitlines() if "status comment" in line]
    assert len(said) == 2 and all(
        line.endswith(
            "status comment on issue #7 not written: ForgeError: cannot read whose token "
            "this is: GitHub is failing (500): Server Error ***"
        )
        for line in said
    )
    assert TOKEN not in out.getvalue()
    assert sleeps == [1.0, 2.0] * 2  # waited on the clock the test holds, never slept


def test_a_ticket_from_no_issue_or_without_a_token_writes_nothing(
    tmp_path: Path, github: FakeGitHub
) -> None:
    plain = write_ticket(tmp_path / "plain")
    github_status(github).show(run_record(ticket_snapshot=str(plain)), [].append)
    no_token = replace(github_status(github), environ={})
    no_token.show(record_for(issue_ticket(tmp_path)), [].append)
    assert github.requests == []


def test_status_is_on_only_for_a_forge_source_with_its_token() -> None:
    source = GitHubSource(kind="github", repo=REPO, label="orchestrate")
    assert isinstance(status_for((), {"GITHUB_TOKEN": "t"}), NoStatus)
    assert isinstance(status_for((source,), {}), NoStatus)
    assert isinstance(status_for((source,), {"GITHUB_TOKEN": "t"}), StatusComments)


def test_gitlab_notes_are_kept_the_same_way(tmp_path: Path, gitlab: FakeGitLab) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["orchestrate"], "2026-01-01T00:00:00Z")
    issue = gitlab.projects[PROJECT]["issues"][0]
    issue["notes"].append({"id": 99, "body": f"{marker(TICKET)}\nforged", "system": False,
                           "author": {"username": "mallory"}, "history": []})  # fmt: skip
    source = GitLabSource(kind="gitlab", project=PROJECT, label="orchestrate",
                          base_url=gitlab.base_url)  # fmt: skip
    status = StatusComments((source,), {"GITLAB_TOKEN": GITLAB_TOKEN})
    ticket = issue_ticket(tmp_path, "gitlab", PROJECT)
    issue["iid"] = 7

    status.show(record_for(ticket), [].append)
    status.show(record_for(ticket, RunState.COMPLETED), [].append)

    forged, ours = issue["notes"]
    assert forged["body"].endswith("forged") and forged["history"] == []
    assert ours["author"] == {"username": "bot"} and "**Completed**" in ours["body"]
    assert len(ours["history"]) == 1 and "**Started**" in ours["history"][0]
    assert sum(r.path == "/api/v4/user" for r in gitlab.requests) == 1


def test_a_create_the_forge_made_but_answered_500_is_found_not_made_twice(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)
    status = github_status(github)
    github.acted_then_failed.append(500)  # the comment is made, the answer says it failed
    said: list[str] = []

    status.show(record_for(ticket), said.append)
    status.show(record_for(ticket, RunState.COMPLETED), said.append)

    (comment,) = github.comments_on(REPO, 7)
    assert "**Completed**" in comment["body"] and len(comment["history"]) == 1
    assert [r.method for r in github.requests].count("POST") == 1
    assert said == []


def test_gitlab_a_note_made_but_answered_500_is_not_posted_again(
    tmp_path: Path, gitlab: FakeGitLab
) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["orchestrate"], "2026-01-01T00:00:00Z")
    issue = gitlab.projects[PROJECT]["issues"][0]
    status, ticket, sleeps = gitlab_status(tmp_path, gitlab)
    gitlab.acted_then_failed.append(500)
    said: list[str] = []

    status.show(record_for(ticket), said.append)
    status.show(record_for(ticket, RunState.COMPLETED), said.append)

    (ours,) = issue["notes"]
    assert "**Completed**" in ours["body"]
    assert [r.method for r in gitlab.requests].count("POST") == 1
    assert sleeps == [] and said == []


def test_a_failed_create_that_made_nothing_is_one_line_and_the_next_status_writes(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)
    status = github_status(github)
    said: list[str] = []
    status.show(record_for(ticket, RunState.COMPLETED), said.append)  # asks /user once
    github.comments.clear()
    github.answer(200, body=[])  # the list: no comment of ours
    github.answer(502, body={"message": f"Bad Gateway {TOKEN}"})  # the create: nothing made

    status.show(record_for(ticket), said.append)
    assert github.comments_on(REPO, 7) == []
    status.show(record_for(ticket), said.append)

    (comment,) = github.comments_on(REPO, 7)
    assert "**Started**" in comment["body"]
    assert said == ["status comment on issue #7 not written: ForgeError: cannot comment on "
                    "issue #7: GitHub is failing (502): Bad Gateway ***"]  # fmt: skip


def labelled_github(fake: FakeGitHub) -> StatusComments:
    source = GitHubSource(kind="github", repo=REPO, label="orchestrate", api_url=fake.url,
                          status_labels=True)  # fmt: skip
    return StatusComments((source,), {"GITHUB_TOKEN": TOKEN})


def test_status_labels_follow_the_run_and_leave_other_labels_alone(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, bash_stage("build", "echo building"))
    out = io.StringIO()
    services = make_services(load_config(config), tmp_path / "state", out=out,
                             environ={"PATH": "/usr/bin:/bin"}, status=labelled_github(github))  # fmt: skip
    issue = github.add_issue(REPO, 7, "Deal", "", ("orchestrate", "bug", "orchestrator:failed"))

    record = run_ticket(load_ticket(issue_ticket(tmp_path / "tickets")), services)

    assert record.state is RunState.COMPLETED
    assert [label["name"] for label in issue["labels"]] == [
        "orchestrate", "bug", "orchestrator:completed",
    ]  # fmt: skip
    label_calls = [(r.method, r.path.rsplit("/", 1)[-1], r.body) for r in github.requests
                   if "/labels" in r.path and r.method != "GET"]  # fmt: skip
    assert label_calls == [
        ("POST", "labels", {"labels": ["orchestrator:running"]}),  # started
        ("DELETE", "orchestrator%3Afailed", None),  # an earlier run's, ours: taken off
        ("POST", "labels", {"labels": ["orchestrator:completed"]}),  # completed
        ("DELETE", "orchestrator%3Arunning", None),
    ]
    (comment,) = github.comments_on(REPO, 7)
    assert "**Completed**" in comment["body"]
    assert TOKEN not in out.getvalue()


@pytest.mark.parametrize(
    ("state", "label"),
    [
        (RunState.RUNNING, "orchestrator:running"),
        (RunState.AWAITING_APPROVAL, "orchestrator:awaiting-approval"),
        (RunState.NEEDS_HUMAN, "orchestrator:needs-human"),
        (RunState.FAILED, "orchestrator:failed"),
        (RunState.COMPLETED, "orchestrator:completed"),
    ],
)
def test_each_status_is_one_label_of_ours(
    tmp_path: Path, github: FakeGitHub, state: RunState, label: str
) -> None:
    ticket = issue_ticket(tmp_path)
    issue = github.add_issue(REPO, 7, "Deal", "", ("orchestrate", "orchestrator:running"))
    said: list[str] = []

    labelled_github(github).show(record_for(ticket, state), said.append)

    assert [x["name"] for x in issue["labels"]] == ["orchestrate", label]
    assert said == []


def test_a_failing_label_call_is_one_line_and_the_comment_is_still_written(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ticket = issue_ticket(tmp_path)  # issue #7 is not in the fake: its labels answer 404
    said: list[str] = []

    labelled_github(github).show(record_for(ticket), said.append)

    assert said == ["status label on issue #7 not set: ForgeError: cannot list the labels of "
                    f"issue #7: {REPO} not found (404), or the token cannot see it"]  # fmt: skip
    (comment,) = github.comments_on(REPO, 7)
    assert "**Started**" in comment["body"]


def test_without_status_labels_no_label_is_asked_for(tmp_path: Path, github: FakeGitHub) -> None:
    github.add_issue(REPO, 7, "Deal", "", ("orchestrate",))
    github_status(github).show(record_for(issue_ticket(tmp_path)), [].append)
    assert not any("/labels" in r.path for r in github.requests)
    with pytest.raises(ValueError, match="status_labels"):
        GitHubSource(kind="github", repo=REPO, label="x", status_labels="yes")  # type: ignore[arg-type]


def test_gitlab_status_labels_in_one_request_others_kept(
    tmp_path: Path, gitlab: FakeGitLab
) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["orchestrate", "orchestrator:running", "team::cards"],
                     "2026-01-01T00:00:00Z")  # fmt: skip
    issue = gitlab.projects[PROJECT]["issues"][0]
    status, ticket, sleeps = gitlab_status(tmp_path, gitlab, status_labels=True)
    said: list[str] = []

    status.show(record_for(ticket, RunState.AWAITING_APPROVAL), said.append)

    assert issue["labels"] == ["orchestrate", "team::cards", "orchestrator:awaiting-approval"]
    (put,) = [r for r in gitlab.requests if r.method == "PUT"]
    assert put.path.endswith("/issues/7") and put.body == {
        "add_labels": "orchestrator:awaiting-approval",
        "remove_labels": "orchestrator:completed,orchestrator:failed,orchestrator:needs-human,"
        "orchestrator:running",
    }
    gitlab.fail(500, times=3, body={"message": f"down {GITLAB_TOKEN}"})  # the notes' GETs
    status.show(record_for(ticket, RunState.COMPLETED), said.append)
    assert said == ["status comment on issue #7 not written: ForgeError: cannot list the notes "
                    "of issue #7: GitLab is failing (500): down ***"]  # fmt: skip
    assert sleeps == [1.0, 2.0]  # a GET, asked again (the sleep injected: nothing slept)
    assert issue["labels"][-1] == "orchestrator:completed"  # the label went on regardless


def gitlab_status(
    tmp_path: Path, gitlab: FakeGitLab, **options: Any
) -> tuple[StatusComments, Path, list[float]]:
    """Status kept on the fake's first issue (renumbered 7) through a real GitLabForge
    whose back-off sleeps are recorded, not slept: the status, its ticket, the sleeps."""
    gitlab.projects[PROJECT]["issues"][0]["iid"] = 7
    source = GitLabSource(kind="gitlab", project=PROJECT, label="orchestrate",
                          base_url=gitlab.base_url, **options)  # fmt: skip
    sleeps: list[float] = []

    def thread_for(source: ForgeSource, project: str, token: str) -> IssueThread:
        assert isinstance(source, GitLabSource)
        return GitLabForge(UrllibClient(timeout_s=5), source.base_url, project, token,
                           sleep=sleeps.append)  # fmt: skip

    status = StatusComments((source,), {"GITLAB_TOKEN": GITLAB_TOKEN}, thread_for=thread_for)
    return status, issue_ticket(tmp_path, "gitlab", PROJECT), sleeps


def test_the_status_comments_wait_a_rate_limit_out_for_the_configured_time_at_most() -> None:
    # [recovery] forge_max_wait_s reaches the forge the comments are written with (issue 43),
    # GitHub's and GitLab's alike; not the fixed 60 s every forge call used to wait.
    sources = (
        GitHubSource(kind="github", repo="o/r", label="go"),
        GitLabSource(kind="gitlab", project="g/p", label="go", base_url="https://gl.example"),
    )
    status = status_for(sources, {"GITHUB_TOKEN": "t", "GITLAB_TOKEN": "t"}, 7.0)
    assert isinstance(status, StatusComments)
    for source in sources:
        thread = status.thread_for(source, "o/r" if source.kind == "github" else "g/p", "t")
        assert getattr(thread, "_max_wait_s") == 7.0  # noqa: B009 - the forge's own slot
