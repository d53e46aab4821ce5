"""The local, offline forge: the branch was pushed to the ticket's own repository, and the
pull request is a record (``pull-request.json`` in the run directory) a person or a script
reads. Pure apart from the ``save`` it is given: the stage program supplies the previous
record, the clock and the writer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.forges.base import PullRequest


def pull_request_record(
    *,
    repository: str,
    head: str,
    base: str,
    head_sha: str,
    title: str,
    body: str,
    commits: Sequence[tuple[str, str]],
    created_at: str,
) -> dict[str, Any]:
    return {
        "forge": "local",
        "repository": repository,
        "head": head,
        "base": base,
        "head_sha": head_sha,
        "title": title,
        "body": body,
        "commits": [{"sha": sha, "subject": subject} for sha, subject in commits],
        "created_at": created_at,
    }


def choose_created_at(previous: Mapping[str, Any] | None, head_sha: str, now: str) -> str:
    """The PR was 'created' when its current head was first recorded: a rerun of the stage
    for the same head keeps that time; a new head is a new PR record."""
    if previous and previous.get("head_sha") == head_sha:
        created = previous.get("created_at")
        if isinstance(created, str) and created:
            return created
    return now


@dataclass(frozen=True, kw_only=True)
class LocalForge:
    """Records the pull request of one pushed head. ``previous`` is the record an earlier
    attempt left (None when there is none, or it is unreadable)."""

    repository: str
    head_sha: str
    commits: Sequence[tuple[str, str]]
    previous: Mapping[str, Any] | None
    now: str
    url: str
    save: Callable[[dict[str, Any]], None]

    def open_pull_request(self, head: str, base: str, title: str, body: str) -> PullRequest:
        created_at = choose_created_at(self.previous, self.head_sha, self.now)
        self.save(
            pull_request_record(
                repository=self.repository, head=head, base=base, head_sha=self.head_sha,
                title=title, body=body, commits=self.commits, created_at=created_at,
            )
        )  # fmt: skip
        return PullRequest(number=0, url=self.url, created=created_at == self.now)
