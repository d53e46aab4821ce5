"""``GitHubForge.permission``: a collaborator's permission as GitHub says it at the time,
against the loopback fake (what approval by comment asks before it answers anything)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.forges.base import ForgeError
from orchestrator.forges.github import GitHubForge
from orchestrator.forges.http import UrllibClient

from support.github_fake import TOKEN, FakeGitHub, serve_github

REPO = "octo/widgets"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def forge(fake: FakeGitHub, token: str = TOKEN, sleeps: list[float] | None = None) -> GitHubForge:
    waits = sleeps if sleeps is not None else []
    return GitHubForge(UrllibClient(fake.url), REPO, token, sleep=waits.append)


def test_the_permission_is_read_at_the_time_it_is_asked(github: FakeGitHub) -> None:
    github.permissions[REPO] = {"alice": "write", "bob": "triage"}
    assert forge(github).permission("alice") == "write"
    assert forge(github).permission("bob") == "triage"
    assert forge(github).permission("stranger") == "none"
    github.permissions[REPO]["alice"] = "read"  # taken away: the next answer says so
    assert forge(github).permission("alice") == "read"
    assert github.requests[-1].path == f"/repos/{REPO}/collaborators/alice/permission"


def test_a_name_github_would_not_make_is_not_asked_about(github: FakeGitHub) -> None:
    assert forge(github).permission("../../user") is None
    assert forge(github).permission("a" * 60) is None
    assert github.requests == []


def test_a_missing_account_is_none_and_a_refusal_an_error_without_the_token(
    github: FakeGitHub,
) -> None:
    github.answer(404, body={"message": "Not Found"})
    assert forge(github).permission("ghost") is None
    for _ in range(3):  # a GET: asked three times in all
        github.answer(500, body={"message": f"boom {TOKEN}"})
    sleeps: list[float] = []
    with pytest.raises(ForgeError) as failed:
        forge(github, sleeps=sleeps).permission("alice")
    assert failed.value.kind == "outage" and TOKEN not in str(failed.value)
    assert sleeps == [1.0, 2.0]
    with pytest.raises(ForgeError, match="rejected the token"):
        forge(github, "ghp_wrong").permission("alice")
