"""GitHub issue comments over loopback HTTP (tests/support/github_fake.py): listed across pages,
created, edited in place (the fake keeps each edit's history), whose token it is; a
refusal is a typed error of one line without the token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.forges.base import ForgeError
from orchestrator.forges.github import GitHubForge
from orchestrator.forges.http import UrllibClient

from support.github_fake import LOGIN, TOKEN, FakeGitHub, serve_github

REPO = "octo/widgets"


@pytest.fixture
def github_fake() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def forge(fake: FakeGitHub, token: str = TOKEN) -> GitHubForge:
    return GitHubForge(UrllibClient(fake.url, timeout_s=5), REPO, token)


def test_comments_are_created_listed_and_edited_in_place(github_fake: FakeGitHub) -> None:
    github = forge(github_fake)
    github_fake.add_comment(REPO, 3, "first!", login="ann")

    comment_id = github.create_comment(3, "Picked up")
    github.edit_comment(3, comment_id, "Done")
    comments = github.issue_comments(3)

    assert [(c.author, c.body) for c in comments] == [("ann", "first!"), (LOGIN, "Done")]
    assert comments[1].id == comment_id
    assert comments[1].url.endswith(f"/issues/3#issuecomment-{comment_id}")
    assert comments[1].created_at and comments[1].updated_at > comments[1].created_at
    assert github_fake.comments_on(REPO, 3)[1]["history"] == ["Picked up"]
    patch = [r for r in github_fake.requests if r.method == "PATCH"]
    assert [r.path for r in patch] == [f"/repos/{REPO}/issues/comments/{comment_id}"]
    assert github.issue_comments(4) == []


def test_every_page_of_comments_is_read(github_fake: FakeGitHub) -> None:
    for n in range(5):
        github_fake.add_comment(REPO, 1, f"comment {n}")

    comments = forge(github_fake).issue_comments(1, _per_page=2)

    assert [c.body for c in comments] == [f"comment {n}" for n in range(5)]
    pages = [r.query["page"] for r in github_fake.requests if r.path.endswith("/comments")]
    assert pages == ["1", "2", "3"]


def test_own_login_is_the_tokens_account(github_fake: FakeGitHub) -> None:
    assert forge(github_fake).own_login() == LOGIN


def test_a_refusal_is_typed_and_one_line_without_the_token(github_fake: FakeGitHub) -> None:
    github_fake.answer(500, body={"message": f"boom\nwith {TOKEN}"})
    with pytest.raises(ForgeError) as failing:
        forge(github_fake).create_comment(3, "x")
    assert failing.value.kind == "outage"
    assert (
        str(failing.value) == "cannot comment on issue #3: GitHub is failing (500): boom with ***"
    )

    with pytest.raises(ForgeError) as missing:
        forge(github_fake).edit_comment(3, 12345, "x")
    assert missing.value.kind == "not_found"

    with pytest.raises(ForgeError) as rejected:
        forge(github_fake, token="ghp_wrong").issue_comments(3)
    assert rejected.value.kind == "auth"
    assert "ghp_wrong" not in str(rejected.value)
