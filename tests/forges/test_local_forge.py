"""The local forge, pinned without a repository: what it records, and that asking again
for the same head keeps the first record's time instead of "opening" a second one."""

from __future__ import annotations

from typing import Any

from orchestrator.forges.base import Forge, PullRequest
from orchestrator.forges.local import LocalForge

COMMITS = (("a" * 40, "Fix deal()"), ("b" * 40, "Test deal()"))


def forge(previous: dict[str, Any] | None, head_sha: str, now: str) -> tuple[Forge, list[Any]]:
    saved: list[dict[str, Any]] = []
    local = LocalForge(
        repository="/srv/origin.git", head_sha=head_sha, commits=COMMITS, previous=previous,
        now=now, url="file:///run/pull-request.json", save=saved.append,
    )  # fmt: skip
    return local, saved


def test_the_first_request_is_recorded_with_everything_a_reader_needs() -> None:
    local, saved = forge(None, "c" * 40, "2026-12-01T00:00:00+00:00")
    pull = local.open_pull_request("orch/T-1", "main", "deal() hands out one card too few", "body")
    assert pull == PullRequest(number=0, url="file:///run/pull-request.json", created=True)
    assert saved == [
        {
            "forge": "local", "repository": "/srv/origin.git", "head": "orch/T-1",
            "base": "main", "head_sha": "c" * 40, "title": "deal() hands out one card too few",
            "body": "body",
            "commits": [{"sha": "a" * 40, "subject": "Fix deal()"},
                        {"sha": "b" * 40, "subject": "Test deal()"}],
            "created_at": "2026-12-01T00:00:00+00:00",
        }
    ]  # fmt: skip


def test_asking_again_for_the_same_head_keeps_the_first_time() -> None:
    previous = {"head_sha": "c" * 40, "created_at": "2026-12-01T00:00:00+00:00"}
    again, saved = forge(previous, "c" * 40, "2026-12-01T09:00:00+00:00")
    pull = again.open_pull_request("orch/T-1", "main", "t", "b")
    assert pull.created is False
    assert saved[0]["created_at"] == "2026-12-01T00:00:00+00:00"


def test_a_new_head_is_a_new_request() -> None:
    previous = {"head_sha": "c" * 40, "created_at": "2026-12-01T00:00:00+00:00"}
    local, saved = forge(previous, "d" * 40, "2026-12-01T09:00:00+00:00")
    assert local.open_pull_request("orch/T-1", "main", "t", "b").created is True
    assert saved[0]["created_at"] == "2026-12-01T09:00:00+00:00"


def test_a_damaged_previous_record_is_no_reason_to_keep_its_time() -> None:
    local, saved = forge({"head_sha": "c" * 40, "created_at": 7}, "c" * 40, "now")
    assert local.open_pull_request("h", "main", "t", "b").created is True
    assert saved[0]["created_at"] == "now"
