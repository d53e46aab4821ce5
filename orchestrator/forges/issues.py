"""Issues on a forge, as the ticket intake reads them: one shape for GitHub and GitLab.

An ``IssueTracker`` lists the open issues carrying a label; what becomes of them (a
ticket id, a capped and marked body, a kind) is decided in ``domain/intake.py``. Every
field here is the forge's word, written by whoever opened the issue: untrusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ForgeIssue:
    number: int  # GitHub's number / GitLab's iid
    title: str
    body: str
    labels: tuple[str, ...]
    state: str  # "open" | "closed"
    url: str  # the issue's web URL
    author: str
    assignees: tuple[str, ...] = ()


class IssueTracker(Protocol):
    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every open issue with ``label`` (all pages), oldest first."""
        ...
