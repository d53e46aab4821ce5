"""Issues on a forge, as the ticket intake reads them: one shape for GitHub and GitLab.

An ``IssueTracker`` lists the open issues carrying a label; what becomes of them (a
ticket id, a capped and marked body, a kind) is decided in ``domain/intake.py``. Every
field here is the forge's word, written by whoever opened the issue: untrusted.
"""

from __future__ import annotations

from typing import Protocol

from orchestrator.domain.issues import ForgeIssue

__all__ = ["ForgeIssue", "IssueTracker"]


class IssueTracker(Protocol):
    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every open issue with ``label`` (all pages), oldest first."""
        ...
