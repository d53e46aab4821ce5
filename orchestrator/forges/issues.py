"""Issues on a forge, as the ticket intake reads them: one shape for GitHub and GitLab.

An ``IssueTracker`` lists the open issues carrying a label; what becomes of them (a
ticket id, a capped and marked body, a kind) is decided in ``domain/intake.py``. Every
field here is the forge's word, written by whoever opened the issue: untrusted.
"""

from __future__ import annotations

from typing import Protocol

from orchestrator.domain.issues import ForgeIssue

__all__ = ["Comment", "ForgeIssue", "IssueTracker"]


class Comment(Protocol):
    """An issue comment as both forges give it (``github.IssueComment``, ``gitlab.IssueNote``)."""

    @property
    def id(self) -> int: ...
    @property
    def body(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def created_at(self) -> str: ...
    @property
    def updated_at(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def author_person(self) -> bool | None:
        """The forge's own word, in the comment's author object, on whether the author is
        a person (True) or an app's or a token's account (False); None when it does not say."""
        ...


class IssueTracker(Protocol):
    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every open issue with ``label`` (all pages), oldest first."""
        ...
