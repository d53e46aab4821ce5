"""GitHub issues over loopback HTTP (tests/support/github_fake.py): pagination by Link headers,
rate limits waited out with the waits asserted (nothing sleeps), 404/5xx/401 as typed
errors without the token, pull requests skipped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.forges.base import ForgeError
from orchestrator.forges.github_issues import GitHubIssues
from orchestrator.forges.http import UrllibClient, send_with_backoff

from support.github_fake import TOKEN, FakeGitHub, serve_github

REPO = "octo/widgets"


@pytest.fixture
def github_fake() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def tracker(fake: FakeGitHub, waits: list[float], token: str = TOKEN) -> GitHubIssues:
    return GitHubIssues(UrllibClient(timeout_s=5), fake.url, REPO, token, sleep=waits.append)


def test_every_page_is_read_oldest_first_and_pull_requests_are_skipped(
    github_fake: FakeGitHub,
) -> None:
    github_fake.per_page_cap = 2
    for number in (5, 1, 3, 2, 4):
        github_fake.add_issue(REPO, number, f"issue {number}", "text", ("orchestrate",))
    github_fake.add_issue(REPO, 6, "a pull request", "", ("orchestrate",), pull_request=True)
    github_fake.add_issue(REPO, 7, "other label", "", ("later",))
    github_fake.add_issue(REPO, 8, "closed", "", ("orchestrate",), state="closed")
    waits: list[float] = []

    issues = tracker(github_fake, waits).list_issues("orchestrate")

    assert [issue.number for issue in issues] == [1, 2, 3, 4, 5]
    assert issues[0].labels == ("orchestrate",) and issues[0].author == "reporter"
    assert issues[0].url == f"https://github.com/{REPO}/issues/1"
    assert len(github_fake.requests) == 3  # 6 listed items, 2 a page
    first = github_fake.requests[0].query
    assert first == {"state": "open", "labels": "orchestrate", "per_page": "100",
                     "sort": "created", "direction": "asc"}  # fmt: skip
    assert github_fake.requests[2].query["page"] == "3"
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in github_fake.requests)
    assert waits == []


def test_assignee_filters(github_fake: FakeGitHub) -> None:
    github_fake.add_issue(REPO, 1, "mine", "", ("go",), assignees=("bot",))
    github_fake.add_issue(REPO, 2, "theirs", "", ("go",), assignees=("someone",))

    issues = tracker(github_fake, []).list_issues("go", assignee="bot")

    assert [(i.number, i.assignees) for i in issues] == [(1, ("bot",))]
    assert github_fake.requests[0].query["assignee"] == "bot"


def test_rate_limits_are_waited_out_as_the_server_asks(github_fake: FakeGitHub) -> None:
    github_fake.add_issue(REPO, 1, "one", "", ("go",))
    github_fake.answer(429, {"Retry-After": "7"}, {"message": "secondary rate limit"})
    github_fake.answer(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"})
    waits: list[float] = []
    client = UrllibClient(timeout_s=5)

    def send():  # type: ignore[no-untyped-def]
        return client.request("GET", f"{github_fake.url}/repos/{REPO}/issues",
                              headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip

    response = send_with_backoff(send, sleep=waits.append, clock=lambda: 990.0)

    assert response.status_code == 200
    assert waits == [7.0, 11.0]  # Retry-After; then the reset epoch, less now, plus 1


def test_a_rate_limit_that_outlasts_the_budget_is_an_error_without_sleeping(
    github_fake: FakeGitHub,
) -> None:
    github_fake.answer(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999"})
    waits: list[float] = []

    with pytest.raises(ForgeError) as caught:
        tracker(github_fake, waits).list_issues("go")

    assert caught.value.kind == "rate_limited"
    assert waits == []


def test_5xx_is_retried_with_bounded_backoff_then_reported(github_fake: FakeGitHub) -> None:
    for _ in range(3):
        github_fake.answer(502, body={"message": f"bad gateway {TOKEN}"})
    waits: list[float] = []

    with pytest.raises(ForgeError) as caught:
        tracker(github_fake, waits).list_issues("go")

    assert waits == [1.0, 2.0]
    assert caught.value.kind == "outage"
    assert str(caught.value) == (
        f"cannot list the issues of {REPO}: GitHub is failing (502): bad gateway ***"
    )


@pytest.mark.parametrize(
    ("status", "kind"), [(404, "not_found"), (401, "auth"), (403, "forbidden"), (422, "rejected")]
)
def test_errors_are_typed_and_free_of_the_token(
    github_fake: FakeGitHub, status: int, kind: str
) -> None:
    github_fake.answer(status, body={"message": f"no {TOKEN}"})

    with pytest.raises(ForgeError) as caught:
        tracker(github_fake, []).list_issues("go")

    assert caught.value.kind == kind
    assert TOKEN not in str(caught.value) and TOKEN not in repr(caught.value)


def test_a_wrong_token_is_refused_by_the_fake(github_fake: FakeGitHub) -> None:
    github_fake.add_issue(REPO, 1, "one", "", ("go",))
    with pytest.raises(ForgeError, match=r"rejected the token \(401\): Bad credentials"):
        tracker(github_fake, [], token="wrong").list_issues("go")


def test_network_down_is_an_outage_without_the_token() -> None:
    dead = GitHubIssues(
        UrllibClient(timeout_s=2), "http://127.0.0.1:9", REPO, TOKEN, sleep=[].append
    )
    with pytest.raises(ForgeError) as caught:
        dead.list_issues("go")
    assert caught.value.kind == "outage" and TOKEN not in str(caught.value)


def test_a_next_page_on_another_host_is_not_followed(github_fake: FakeGitHub) -> None:
    github_fake.answer(200, {"Link": '<https://evil.example/steal?page=2>; rel="next"'}, [])
    with pytest.raises(ForgeError, match="another host"):
        tracker(github_fake, []).list_issues("go")
    assert len(github_fake.requests) == 1
