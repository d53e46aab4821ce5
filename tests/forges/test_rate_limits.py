"""Issue 43: a rate limit is waited out on every forge call (a list, a comment, a pull
request, a permission), from what the forge said (``Retry-After`` as seconds or an
HTTP-date, GitHub's ``x-ratelimit-reset``, GitLab's ``RateLimit-Reset``), within the wait
one request may take; past it the call fails ``rate_limited`` with the time to ask again,
never ``auth_error``. A 403 is a refusal of the token only when nothing says rate limit.
A POST is sent again after a rate limit (the forge did not act), never after a 5xx (it
may have): opening looks for the pull request instead. Against the loopback fakes in
their real shapes, fed hostile headers; every wait is counted on a clock the test holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from orchestrator.forges._rest import FAR_S, wait_asked
from orchestrator.forges.base import ForgeError
from orchestrator.forges.github import GitHubForge
from orchestrator.forges.github_issues import GitHubIssues
from orchestrator.forges.gitlab import GitLabForge
from orchestrator.forges.http import Headers, Response, UrllibClient

from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab, gitlab_server  # noqa: F401 - the fixture
from support.gitlab_fake import TOKEN as GITLAB_TOKEN

pytestmark = pytest.mark.timeout(30)

REPO = "octo/widgets"
NOW = 1767600000.0  # 2026-01-05T08:00:00Z: the clock every forge here reads
YEAR = str(365 * 24 * 3600)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        fake.pulls[REPO] = []
        yield fake


def github_forge(fake: FakeGitHub, sleeps: list[float], max_wait_s: float = 60.0) -> GitHubForge:
    return GitHubForge(UrllibClient(fake.url), REPO, TOKEN, sleep=sleeps.append,
                       clock=lambda: NOW, max_wait_s=max_wait_s)  # fmt: skip


def gitlab_forge(fake: FakeGitLab, sleeps: list[float]) -> GitLabForge:
    return GitLabForge(UrllibClient(), fake.base_url, PROJECT, GITLAB_TOKEN,
                       sleep=sleeps.append, clock=lambda: NOW)  # fmt: skip


def open_pr(forge: GitHubForge | GitLabForge) -> Any:
    return forge.open_pull_request(head="orch/T-1", base="main", title="Fix", body="Body")


def posts(fake: FakeGitHub, suffix: str) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path.endswith(suffix))


# --- what a wait is read from ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"Retry-After": "30"}, 30.0),
        ({"Retry-After": YEAR}, float(YEAR)),  # a year is said as it is: past any budget
        ({"Retry-After": "99999999999"}, FAR_S),  # longer is no more than "not now"
        ({"Retry-After": "-5"}, 0.0),  # a negative delay: now, never a negative sleep
        ({"Retry-After": "Mon, 05 Jan 2026 08:00:45 GMT"}, 45.0),  # an HTTP-date
        ({"Retry-After": "Sun, 04 Jan 2026 08:00:00 GMT"}, 0.0),  # a date past
        ({"Retry-After": "soon"}, 1.0),  # garbage: the doubling back-off
        ({"Retry-After": "nan"}, 1.0),
        ({"Retry-After": "inf"}, 1.0),
        ({"Retry-After": "1e400"}, 1.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 10)}, 11.0),
        ({"x-ratelimit-reset": str(int(NOW) - 100)}, 1.0),  # a reset past: ask again now
        ({"RateLimit-Reset": str(int(NOW) + 5)}, 6.0),  # GitLab's
        ({"RateLimit-Reset": "garbage"}, 1.0),
        ({}, 1.0),
    ],
)
def test_the_wait_is_what_the_forge_asked_read_safely(headers: dict[str, str], wait: float) -> None:
    assert wait_asked(Response(429, Headers(headers), "{}"), 0, NOW) == wait


# --- GitHub: the pull request, the issue's comments, the permission, the list ---------------


def test_a_secondary_rate_limit_on_post_pulls_is_waited_out_and_one_pr_opened(
    github: FakeGitHub,
) -> None:
    github.secondary_limit("POST", "/pulls", retry_after="30")
    sleeps: list[float] = []
    pull = open_pr(github_forge(github, sleeps))
    assert pull.created and len(github.pulls[REPO]) == 1
    assert sleeps == [30.0] and posts(github, "/pulls") == 2


@pytest.mark.parametrize("status", [403, 429])
def test_a_rate_limit_past_the_wait_is_rate_limited_with_its_time_never_auth_error(
    github: FakeGitHub, status: int
) -> None:
    github.secondary_limit("POST", "/pulls", retry_after=YEAR, status=status)
    sleeps: list[float] = []
    with pytest.raises(ForgeError) as caught:
        open_pr(github_forge(github, sleeps))
    assert caught.value.kind == "rate_limited"
    assert caught.value.retry_at == NOW + float(YEAR)
    assert str(caught.value) == (
        f"cannot open a pull request for orch/T-1 into main: GitHub's rate limit ({status}): "
        "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
        "again. If you reach out to GitHub Support for help, please include the request ID "
        "0000:1111:2222.; it asks to wait until 2027-01-05T08:00:00Z, past the 60 s one "
        "request may wait"
    )
    assert sleeps == [] and github.pulls[REPO] == []  # not slept, and nothing made


def test_a_spent_primary_limit_waits_until_its_reset(github: FakeGitHub) -> None:
    github.primary_limit("POST", "/pulls", reset=str(int(NOW) + 20))
    sleeps: list[float] = []
    assert open_pr(github_forge(github, sleeps)).created
    assert sleeps == [21.0] and len(github.pulls[REPO]) == 1


def test_a_403_is_a_refusal_only_when_nothing_says_rate_limit(github: FakeGitHub) -> None:
    github.on("POST", "/pulls", 403, body={"message": "Resource not accessible by integration"})
    with pytest.raises(ForgeError) as caught:
        open_pr(github_forge(github, []))
    assert caught.value.kind == "forbidden" and caught.value.retry_at is None
    # The secondary limit's words alone (no header) are a rate limit, not the token.
    github.on("POST", "/pulls", 403, body={"message": "You have exceeded a secondary rate limit"})
    sleeps: list[float] = []
    assert open_pr(github_forge(github, sleeps)).created
    assert sleeps == [1.0]


def test_a_pull_request_made_then_answered_502_is_found_not_posted_again(
    github: FakeGitHub,
) -> None:
    github.acted_then_failed.append(502)
    sleeps: list[float] = []
    pull = open_pr(github_forge(github, sleeps))
    assert len(github.pulls[REPO]) == 1 and pull.number == github.pulls[REPO][0]["number"]
    assert posts(github, "/pulls") == 1 and sleeps == []


def test_a_5xx_burst_on_post_pulls_is_an_outage_after_one_post(github: FakeGitHub) -> None:
    github.burst("POST", "/pulls", times=3)
    with pytest.raises(ForgeError) as caught:
        open_pr(github_forge(github, []))
    assert caught.value.kind == "outage" and "GitHub is failing (502)" in str(caught.value)
    assert posts(github, "/pulls") == 1 and github.pulls[REPO] == []


def test_a_5xx_burst_on_a_get_is_asked_again(github: FakeGitHub) -> None:
    github.burst("GET", "/pulls", times=2, status=503)
    sleeps: list[float] = []
    assert open_pr(github_forge(github, sleeps)).created
    assert sleeps == [1.0, 2.0]


def test_comments_and_permissions_wait_out_their_limits(github: FakeGitHub) -> None:
    github.add_issue(REPO, 7, "t", "b", ("orchestrate",))
    github.secondary_limit("POST", "/comments", retry_after="Mon, 05 Jan 2026 08:00:09 GMT")
    github.on("GET", "/permission", 429, {"Retry-After": "3"})
    sleeps: list[float] = []
    forge = github_forge(github, sleeps)
    forge.create_comment(7, "status")
    assert forge.permission("alice") == "none"
    assert len(github.comments_on(REPO, 7)) == 1 and sleeps == [9.0, 3.0]


def test_the_wait_is_bounded_in_all_not_per_answer(github: FakeGitHub) -> None:
    github.secondary_limit("POST", "/comments", retry_after="40", times=2)
    github.add_issue(REPO, 7, "t", "b", ("orchestrate",))
    sleeps: list[float] = []
    with pytest.raises(ForgeError) as caught:
        github_forge(github, sleeps, max_wait_s=60).create_comment(7, "status")
    assert caught.value.kind == "rate_limited" and sleeps == [40.0]  # 40 + 40 > 60
    assert github.comments_on(REPO, 7) == []


def test_limits_on_the_paged_issue_list_are_waited_out(github: FakeGitHub) -> None:
    for number in range(1, 6):
        github.add_issue(REPO, number, f"issue {number}", "", ("orchestrate",))
    github.per_page_cap = 2  # three pages, along Link: rel="next"
    github.primary_limit("GET", "/issues", reset="0")  # a reset long past: ask again now
    github.secondary_limit("GET", "/issues", retry_after="-1")  # a negative delay: now
    sleeps: list[float] = []
    tracker = GitHubIssues(UrllibClient(), github.url, REPO, TOKEN, sleep=sleeps.append)
    assert [i.number for i in tracker.list_issues("orchestrate")] == [1, 2, 3, 4, 5]
    assert sleeps == [1.0, 0.0]
    assert sum(1 for r in github.requests if r.path.endswith("/issues")) == 3 + 2


# --- GitLab ----------------------------------------------------------------------------------


def test_gitlab_a_429_on_the_merge_request_is_waited_out_from_its_reset(
    gitlab: FakeGitLab,
) -> None:
    gitlab.rate_limit("POST", "/merge_requests", retry_after="", reset=str(int(NOW) + 7))
    sleeps: list[float] = []
    assert open_pr(gitlab_forge(gitlab, sleeps)).created
    assert sleeps == [8.0] and len(gitlab.projects[PROJECT]["merge_requests"]) == 1


def test_gitlab_a_limit_of_a_year_is_rate_limited_at_once(gitlab: FakeGitLab) -> None:
    gitlab.rate_limit("POST", "/notes", retry_after=YEAR, reset=str(int(NOW) + 9))
    gitlab.add_issue(PROJECT, "t", ["orchestrate"], "2026-01-01T00:00:00Z")
    sleeps: list[float] = []
    with pytest.raises(ForgeError) as caught:
        gitlab_forge(gitlab, sleeps).create_comment(1, "status")
    assert (caught.value.kind, caught.value.retry_at) == ("rate_limited", NOW + float(YEAR))
    assert sleeps == []


def test_gitlab_a_member_lookup_waits_out_its_limit(gitlab: FakeGitLab) -> None:
    gitlab.users["dev"] = 7
    gitlab.projects[PROJECT]["members"][7] = 30
    gitlab.rate_limit("GET", "/members/all/7", retry_after="2")
    sleeps: list[float] = []
    assert gitlab_forge(gitlab, sleeps).access_level("dev") == 30
    assert sleeps == [2.0]


def test_the_httpx_client_of_the_stage_reads_the_same_headers() -> None:
    answers = [
        httpx2.Response(403, headers={"Retry-After": "12"}, json={"message": "slow down"}),
        httpx2.Response(200, json=[]),
        httpx2.Response(201, json={"number": 3, "html_url": "https://ghe.example/o/r/pull/3"}),
    ]
    client = httpx2.Client(base_url="https://ghe.example/api/v3",
                           transport=httpx2.MockTransport(lambda _request: answers.pop(0)))  # fmt: skip
    sleeps: list[float] = []
    forge = GitHubForge(client, REPO, TOKEN, network_errors=(httpx2.TransportError,),
                        sleep=sleeps.append, clock=lambda: NOW)  # fmt: skip
    assert open_pr(forge).number == 3 and sleeps == [12.0]
