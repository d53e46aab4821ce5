"""The GitLab forge against a loopback fake GitLab (``tests/support/gitlab_fake.py``) that answers
in the real API's shapes: merge requests, issues across pages, notes edited in place,
access levels, rate limits waited out with an injected sleep, failures mapped to kinds."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from orchestrator.forges.base import ForgeError, PullRequest
from orchestrator.forges.gitlab import GitLabForge, project_from_url
from orchestrator.forges.issues import ForgeIssue

from support.gitlab_fake import PROJECT, TOKEN, FakeGitLab, gitlab_server  # noqa: F401 (fixture "gitlab")

ENCODED = "/api/v4/projects/grp%2Fsub%2Fcards"


@pytest.fixture
def client() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=10) as http:
        yield http


def forge_for(gitlab: FakeGitLab, client: httpx2.Client, sleeps: list[float] | None = None,
              token: str = TOKEN) -> GitLabForge:  # fmt: skip
    return GitLabForge(client, gitlab.base_url, PROJECT, token,
                       network_errors=(httpx2.TransportError,),
                       sleep=(sleeps if sleeps is not None else []).append,
                       clock=lambda: NOW)  # fmt: skip


NOW = 1767600000.0  # 2026-01-05T08:00:00Z, the clock the forge reads


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"asked to sleep {seconds} s")


def open_t1(forge: GitLabForge) -> PullRequest:
    return forge.open_pull_request(head="orch/T-1", base="main", title="Fix deal()", body="Body")


def test_creates_a_merge_request_then_reuses_it(gitlab: FakeGitLab, client: httpx2.Client) -> None:
    forge = forge_for(gitlab, client)
    url = f"{gitlab.base_url}/{PROJECT}/-/merge_requests/1"
    assert open_t1(forge) == PullRequest(1, url, created=True)
    assert open_t1(forge) == PullRequest(1, url, created=False)
    assert len(gitlab.projects[PROJECT]["merge_requests"]) == 1
    listing, creation, again = gitlab.requests
    assert (listing.method, listing.path) == ("GET", f"{ENCODED}/merge_requests")
    assert listing.query == {
        "source_branch": "orch/T-1",
        "target_branch": "main",
        "state": "opened",
    }
    assert listing.headers["private-token"] == TOKEN and "authorization" not in listing.headers
    assert (creation.method, creation.body["title"], creation.body["description"]) == (
        "POST", "Fix deal()", "Body")  # fmt: skip
    assert again.method == "GET"


def test_a_merge_request_opened_meanwhile_is_reused(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    # The list says none; before our POST lands, someone opened it: GitLab answers 409.
    other = forge_for(gitlab, client)
    gitlab.fail(200, body=[])
    open_t1(other)  # the first GET is answered "none", so this one POSTs: MR !1 exists
    gitlab.requests.clear()
    gitlab.fail(200, body=[])
    pull = open_t1(forge_for(gitlab, client))
    assert pull == PullRequest(1, f"{gitlab.base_url}/{PROJECT}/-/merge_requests/1", False)
    assert [r.method for r in gitlab.requests] == ["GET", "POST", "GET"]


def test_issues_are_listed_across_pages_oldest_first(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    gitlab.default_per_page = 2
    for day in (5, 1, 4, 2, 3):
        gitlab.add_issue(PROJECT, f"day {day}", ["orchestrator"], f"2026-01-0{day}T00:00:00Z",
                         description=f"body {day}", assignees=("bob",) if day == 4 else ())  # fmt: skip
    gitlab.add_issue(PROJECT, "unlabelled", ["bug"], "2026-01-01T00:00:00Z")
    gitlab.add_issue(PROJECT, "closed", ["orchestrator"], "2026-01-01T00:00:00Z", state="closed")
    issues = forge_for(gitlab, client).list_issues("orchestrator")
    assert [i.title for i in issues] == [f"day {d}" for d in (1, 2, 3, 4, 5)]
    assert issues[0] == ForgeIssue(
        number=2, title="day 1", body="body 1", labels=("orchestrator",), state="open",
        url=f"{gitlab.base_url}/{PROJECT}/-/issues/2", author="ann", assignees=())  # fmt: skip
    pages = [r.query.get("page", "1") for r in gitlab.requests]
    assert pages == ["1", "2", "3"]
    assert gitlab.requests[0].query == {"labels": "orchestrator", "state": "opened",
        "order_by": "created_at", "sort": "asc", "per_page": "100"}  # fmt: skip
    assert [i.number for i in forge_for(gitlab, client).list_issues("orchestrator", "bob")] == [3]


def test_a_next_page_on_another_host_is_not_asked(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    """The token goes with every page: a ``Link`` to another host is an outage, not a hop."""
    gitlab.default_per_page = 2
    for day in (1, 2, 3):
        gitlab.add_issue(PROJECT, f"day {day}", ["o"], f"2026-01-0{day}T00:00:00Z")
    real_base = gitlab.base_url
    gitlab.base_url = "http://elsewhere.invalid"  # what the fake writes into Link
    forge = GitLabForge(client, real_base, PROJECT, TOKEN, sleep=no_sleep)
    with pytest.raises(ForgeError) as caught:
        forge.list_issues("o")
    assert (caught.value.kind, str(caught.value)) == (
        "outage",
        f"cannot list issues of {PROJECT}: the next page is on another host; "
        "not sending the token there",
    )
    assert len(gitlab.requests) == 1


def test_comments_are_created_listed_and_edited_in_place(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    gitlab.add_issue(PROJECT, "t", ["o"], "2026-01-01T00:00:00Z")
    forge = forge_for(gitlab, client)
    note_id = forge.create_comment(1, "Picked up: run T-1")
    forge.edit_comment(1, note_id, "Done: !1")
    notes = forge.issue_comments(1)
    assert [(n.id, n.body, n.author, n.system) for n in notes] == [
        (note_id, "Done: !1", "bot", False)
    ]
    stored = gitlab.projects[PROJECT]["issues"][0]["notes"]
    assert stored[0]["history"] == ["Picked up: run T-1"]  # one note, edited: not two
    assert [(r.method, r.path) for r in gitlab.requests[-2:-1]] == [
        ("PUT", f"{ENCODED}/issues/1/notes/{note_id}")]  # fmt: skip
    with pytest.raises(ForgeError) as caught:
        forge.edit_comment(1, 99, "x")
    assert caught.value.kind == "not_found"


def test_access_level_by_username_or_id(gitlab: FakeGitLab, client: httpx2.Client) -> None:
    gitlab.users.update(dev=7, guest=8, stranger=9)
    gitlab.projects[PROJECT]["members"].update({7: 30, 8: 10})
    forge = forge_for(gitlab, client)
    assert (forge.access_level("dev"), forge.access_level(8)) == (30, 10)
    assert (forge.access_level("stranger"), forge.access_level("nobody")) == (None, None)
    assert gitlab.requests[0].query == {"username": "dev"}
    assert gitlab.requests[1].path == f"{ENCODED}/members/all/7"


def test_a_rate_limit_is_waited_out_with_the_injected_sleep(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    gitlab.fail(429, times=2, headers={"Retry-After": "7", "RateLimit-Remaining": "0",
                                       "RateLimit-Reset": "1767600000"})  # fmt: skip
    sleeps: list[float] = []
    assert open_t1(forge_for(gitlab, client, sleeps)).created
    assert sleeps == [7.0, 7.0]


def test_a_rate_limit_longer_than_the_budget_is_rate_limited_at_once(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    gitlab.fail(429, times=4, headers={"Retry-After": "3600"})
    sleeps: list[float] = []
    with pytest.raises(ForgeError) as caught:
        open_t1(forge_for(gitlab, client, sleeps))
    assert (caught.value.kind, str(caught.value)) == (
        "rate_limited",
        f"cannot list merge requests of {PROJECT}: GitLab's rate limit (429): 429 fake; it "
        "asks to wait until 2026-01-05T09:00:00Z, past the 60 s one request may wait",
    )
    assert sleeps == []  # an hour is past what a stage may wait: said at once, not slept


def test_a_failing_gitlab_is_asked_again_then_an_outage(
    gitlab: FakeGitLab, client: httpx2.Client
) -> None:
    gitlab.fail(502, times=1)
    sleeps: list[float] = []
    assert open_t1(forge_for(gitlab, client, sleeps)).created
    assert sleeps == [1.0]


@pytest.mark.parametrize(
    ("status", "body", "kind", "message"),
    [
        (401, {"message": "401 Unauthorized"}, "auth",
         "GitLab rejected the token (401): 401 Unauthorized; check GITLAB_TOKEN"),
        (403, {"message": "403 Forbidden"}, "forbidden",
         "the token may not do this (403): 403 Forbidden"),
        (404, {"message": "404 Project Not Found"}, "not_found",
         f"{PROJECT} not found (404), or the token cannot see it"),
        (500, {"message": "500 Internal Server Error"}, "outage",
         "GitLab is failing (500): 500 Internal Server Error"),
        (422, {"message": {"title": ["is too long"]}}, "rejected",
         "GitLab refused it (422): title is too long"),
        (401, {"message": f"token {TOKEN} is revoked"}, "auth",
         "GitLab rejected the token (401): token *** is revoked; check GITLAB_TOKEN"),
    ],
)  # fmt: skip
def test_failures_are_kinds_in_one_line_without_the_token(
    gitlab: FakeGitLab, client: httpx2.Client, status: int, body: object, kind: str, message: str
) -> None:
    gitlab.fail(status, times=3, body=body)  # a 5xx is asked three times
    forge = forge_for(gitlab, client)
    with pytest.raises(ForgeError) as caught:
        open_t1(forge)
    assert caught.value.kind == kind
    assert str(caught.value) == f"cannot list merge requests of {PROJECT}: {message}"
    for text in (str(caught.value), repr(caught.value), repr(forge)):
        assert TOKEN not in text and "\n" not in text


def test_a_wrong_token_is_auth(gitlab: FakeGitLab, client: httpx2.Client) -> None:
    with pytest.raises(ForgeError) as caught:
        forge_for(gitlab, client, token="glpat-wrong").list_issues("o")
    assert caught.value.kind == "auth"


def test_a_network_failure_is_an_outage(client: httpx2.Client) -> None:
    sleeps: list[float] = []
    forge = GitLabForge(client, "http://127.0.0.1:9", PROJECT, TOKEN,
                        network_errors=(httpx2.TransportError,), sleep=sleeps.append)  # fmt: skip
    with pytest.raises(ForgeError) as caught:
        open_t1(forge)
    assert caught.value.kind == "outage" and str(caught.value).startswith("cannot reach GitLab: ")
    assert sleeps == [1.0, 2.0]  # a GET: asked three times, then said


@pytest.mark.parametrize(
    ("url", "project"),
    [
        ("https://gitlab.com/grp/cards.git", "grp/cards"),
        ("https://gitlab.com/grp/sub/cards", "grp/sub/cards"),
        ("https://oauth2:abc@git.example.org/grp/sub/cards.git/", "grp/sub/cards"),
        ("git@gitlab.com:grp/sub/cards.git", "grp/sub/cards"),
        ("ssh://git@git.example.org:2222/grp/cards.git", "grp/cards"),
    ],
)
def test_project_from_url(url: str, project: str) -> None:
    assert project_from_url(url) == project


@pytest.mark.parametrize(
    "url",
    ["/srv/git/cards.git", "https://gitlab.com/grp", "https://gitlab.com/grp/cards/-/tree/main",
     f"file:///x/{TOKEN}", f"https://u:{TOKEN}@gitlab.com/grp"],
)  # fmt: skip
def test_project_from_url_refuses_what_is_not_a_project(url: str) -> None:
    with pytest.raises(ValueError, match="not a GitLab project URL") as caught:
        project_from_url(url)
    assert f"u:{TOKEN}" not in str(caught.value)


def test_the_forge_insists_on_a_project_and_a_token(client: httpx2.Client) -> None:
    with pytest.raises(ValueError, match="group/name"):
        GitLabForge(client, "https://gitlab.com", "cards", TOKEN)
    with pytest.raises(ValueError, match="token is required"):
        GitLabForge(client, "https://gitlab.com", PROJECT, "")
