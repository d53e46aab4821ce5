"""What is sent again, and what never is: a GET (or a PUT) after a 5xx, a dropped
connection or a timeout, with the bounded back-off of a rate limit; a POST (a comment, a
note) only after a rate limit, never after a 5xx or a dropped connection, since the forge
may have acted on it. Against the loopback fakes, sleeps injected and counted."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.intake import QUEUED, gather
from orchestrator.domain.sources import GitHubSource
from orchestrator.forges.base import ForgeError
from orchestrator.forges.github import GitHubForge
from orchestrator.forges.github_issues import GitHubIssues
from orchestrator.forges.gitlab import GitLabForge
from orchestrator.forges.http import Headers, Response, UrllibClient, send_with_backoff
from orchestrator.storage import FileStorage

from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab, gitlab_server  # noqa: F401 - the fixture
from support.gitlab_fake import TOKEN as GITLAB_TOKEN

pytestmark = pytest.mark.timeout(30)

REPO = "octo/widgets"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def answer(status: int, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, Headers(dict(headers or {})), "{}")


def scripted(*outcomes: Response | BaseException) -> tuple[list[int], Any]:
    """A ``send`` that gives ``outcomes`` in turn (raising the exceptions), and its count."""
    sent: list[int] = []

    def send() -> Response:
        sent.append(1)
        outcome = outcomes[len(sent) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return sent, send


# --- send_with_backoff ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "dropped", [ConnectionResetError("reset by peer"), TimeoutError("timed out"), OSError("x")]
)
def test_a_get_whose_connection_dropped_is_sent_again(dropped: BaseException) -> None:
    sent, send = scripted(dropped, answer(200))
    waits: list[float] = []
    response = send_with_backoff(send, sleep=waits.append, network_errors=(OSError,))
    assert response.status_code == 200 and len(sent) == 2 and waits == [1.0]


def test_a_network_error_past_the_tries_is_raised_as_it_came() -> None:
    sent, send = scripted(*[ConnectionResetError(f"reset {n}") for n in range(3)])
    waits: list[float] = []
    with pytest.raises(ConnectionResetError, match="reset 2"):
        send_with_backoff(send, sleep=waits.append, network_errors=(OSError,))
    assert len(sent) == 3 and waits == [1.0, 2.0]


def test_a_post_is_not_sent_again_after_a_5xx_or_a_dropped_connection() -> None:
    sent, send = scripted(answer(500), answer(201))
    response = send_with_backoff(send, sleep=[].append, idempotent=False)
    assert response.status_code == 500 and len(sent) == 1
    sent, send = scripted(ConnectionResetError("reset"), answer(201))
    with pytest.raises(ConnectionResetError):
        send_with_backoff(send, sleep=[].append, idempotent=False, network_errors=(OSError,))
    assert len(sent) == 1


def test_a_rate_limited_post_is_sent_again_the_server_did_not_act() -> None:
    sent, send = scripted(answer(429, {"Retry-After": "3"}), answer(201))
    waits: list[float] = []
    response = send_with_backoff(send, sleep=waits.append, idempotent=False)
    assert response.status_code == 201 and len(sent) == 2 and waits == [3.0]


# --- GitLab notes --------------------------------------------------------------------------


def gitlab_forge(fake: FakeGitLab, sleeps: list[float], client: Any = None) -> GitLabForge:
    return GitLabForge(client or UrllibClient(timeout_s=5), fake.base_url, PROJECT, GITLAB_TOKEN,
                       sleep=sleeps.append)  # fmt: skip


def test_gitlab_a_note_made_and_answered_500_is_an_outage_and_one_note(gitlab: FakeGitLab) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["go"], "2026-01-01T00:00:00Z")
    gitlab.acted_then_failed.append(500)
    sleeps: list[float] = []

    with pytest.raises(ForgeError) as caught:
        gitlab_forge(gitlab, sleeps).create_comment(1, "status")

    assert caught.value.kind == "outage"
    assert str(caught.value) == (
        "cannot comment on issue #1: GitLab is failing (500): 500 Internal Server Error"
    )
    assert len(gitlab.projects[PROJECT]["issues"][0]["notes"]) == 1
    assert [r.method for r in gitlab.requests] == ["POST"] and sleeps == []


def test_gitlab_a_rate_limited_note_is_sent_again_and_made_once(gitlab: FakeGitLab) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["go"], "2026-01-01T00:00:00Z")
    gitlab.fail(429, headers={"Retry-After": "2"})
    sleeps: list[float] = []

    note_id = gitlab_forge(gitlab, sleeps).create_comment(1, "status")

    (note,) = gitlab.projects[PROJECT]["issues"][0]["notes"]
    assert note["id"] == note_id and sleeps == [2.0]


def test_gitlab_an_edit_is_a_put_and_is_sent_again_after_a_5xx(gitlab: FakeGitLab) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["go"], "2026-01-01T00:00:00Z")
    note = gitlab.add_note(PROJECT, 1, "old", "bot", "2026-01-01T00:00:01Z")
    gitlab.fail(502)
    sleeps: list[float] = []

    gitlab_forge(gitlab, sleeps).edit_comment(1, note["id"], "new")

    assert note["body"] == "new" and sleeps == [1.0]


# --- GitHub comments: no back-off at all, so never a second POST ---------------------------


def test_github_a_comment_made_and_answered_500_is_one_comment(github: FakeGitHub) -> None:
    github.add_issue(REPO, 1, "one", "", ("go",))
    github.acted_then_failed.append(500)
    forge = GitHubForge(UrllibClient(github.url, timeout_s=5), REPO, TOKEN)

    with pytest.raises(ForgeError) as caught:
        forge.create_comment(1, "status")

    assert caught.value.kind == "outage" and len(github.comments_on(REPO, 1)) == 1
    assert [r.method for r in github.requests] == ["POST"]


# --- the intake's lists --------------------------------------------------------------------


def test_github_issues_a_dropped_connection_is_listed_again(github: FakeGitHub) -> None:
    github.add_issue(REPO, 1, "one", "", ("go",))
    github.drops = 1
    waits: list[float] = []
    tracker = GitHubIssues(UrllibClient(timeout_s=5), github.url, REPO, TOKEN, sleep=waits.append)

    issues = tracker.list_issues("go")

    assert [issue.number for issue in issues] == [1]
    assert len(github.requests) == 2 and waits == [1.0]


def test_github_issues_still_dropped_after_the_tries_is_an_outage(github: FakeGitHub) -> None:
    github.drops = 3
    waits: list[float] = []
    tracker = GitHubIssues(UrllibClient(timeout_s=5), github.url, REPO, TOKEN, sleep=waits.append)

    with pytest.raises(ForgeError) as caught:
        tracker.list_issues("go")

    assert caught.value.kind == "outage"
    assert str(caught.value).startswith("cannot reach GitHub: ")
    assert TOKEN not in str(caught.value)
    assert len(github.requests) == 3 and waits == [1.0, 2.0]


class TimesOutOnce:
    """A client whose first request times out (``socket.timeout``) before any answer."""

    def __init__(self, client: UrllibClient) -> None:
        self.client = client
        self.timed_out = False

    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        if not self.timed_out:
            self.timed_out = True
            raise TimeoutError("timed out")
        return self.client.request(method, url, **kwargs)


def test_gitlab_issues_a_timeout_is_listed_again(gitlab: FakeGitLab) -> None:
    gitlab.add_issue(PROJECT, "Deal", ["go"], "2026-01-01T00:00:00Z")
    sleeps: list[float] = []
    client = TimesOutOnce(UrllibClient(timeout_s=5))

    issues = gitlab_forge(gitlab, sleeps, client).list_issues("go")

    assert [issue.number for issue in issues] == [1]
    assert client.timed_out and len(gitlab.requests) == 1 and sleeps == [1.0]


def test_the_intake_takes_in_an_issue_after_a_dropped_connection(
    tmp_path: Path, github: FakeGitHub
) -> None:
    github.add_issue(REPO, 1, "one", "body", ("go",))
    github.drops = 1
    source = GitHubSource(kind="github", repo=REPO, label="go", api_url=github.url)
    waits: list[float] = []

    (report,) = gather((source,), tmp_path, FileStorage(tmp_path / "state"),
                       environ={"GITHUB_TOKEN": TOKEN}, sleep=waits.append)  # fmt: skip

    assert report.error is None
    assert [(e.ticket_id, e.status) for e in report.entries] == [("gh-octo-widgets-1", QUEUED)]
    assert waits == [1.0]


@pytest.mark.parametrize(("retry_after", "waited"), [("30", []), ("3", [3.0])])
def test_the_intake_waits_a_rate_limit_out_only_within_the_configured_wait(
    tmp_path: Path, github: FakeGitHub, retry_after: str, waited: list[float]
) -> None:
    # [recovery] forge_max_wait_s = 5: a limit of 30 s (within the fixed 60 s the intake
    # used to wait) is handed on, the source's error saying when to ask again.
    github.add_issue(REPO, 1, "one", "body", ("go",))
    github.secondary_limit("GET", "/issues", retry_after=retry_after)
    source = GitHubSource(kind="github", repo=REPO, label="go", api_url=github.url)
    waits: list[float] = []

    (report,) = gather((source,), tmp_path, FileStorage(tmp_path / "state"),
                       environ={"GITHUB_TOKEN": TOKEN}, sleep=waits.append, max_wait_s=5.0)  # fmt: skip

    assert waits == waited
    if waited:
        assert report.error is None
        assert [e.ticket_id for e in report.entries] == ["gh-octo-widgets-1"]
    else:
        assert report.error is not None and report.error.startswith("rate_limited: ")
        assert "it asks to wait until" in report.error and report.entries == ()
        assert len(github.requests) == 1  # asked once, not again after the wait it was refused
