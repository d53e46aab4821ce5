"""Issues on a forge, as the ticket intake reads them: one shape for GitHub and GitLab.

An ``IssueTracker`` lists the open issues carrying a label; what becomes of them (a
ticket id, a capped and marked body, a kind) is decided in ``domain/intake.py``. Every
field here is the forge's word, written by whoever opened the issue: untrusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orchestrator.domain.issues import ForgeIssue

__all__ = ["Comment", "ForgeIssue", "IssueTracker"]


@dataclass(frozen=True)
class Comment:
    """A comment on an issue (or pull request), as both forges give it. ``author`` is its
    account's login; ``author_person`` the forge's own word, in the comment's author object,
    on whether that account is a person (True) or an app's or a token's (False), None when
    it does not say (GitLab's notes mostly do not: ``GitLabForge.user_is_bot`` asks the
    account), never read from the comment's text. ``updated_at`` differs from
    ``created_at`` once it was edited; ``url`` is its place on the issue page; ``system``
    notes are GitLab's own ("changed the label")."""

    id: int
    body: str
    author: str
    created_at: str = ""
    updated_at: str = ""
    url: str = ""
    author_person: bool | None = None
    system: bool = False


class IssueTracker(Protocol):
    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every open issue with ``label`` (all pages), oldest first."""
        ...
