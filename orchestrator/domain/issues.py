"""An issue on a forge, as the ticket intake reads it: one shape for GitHub and GitLab
(``forges/issues.py`` lists them; ``domain/intake.py`` makes tickets of them). Every
field is the forge's word, written by whoever opened the issue: untrusted."""

from __future__ import annotations

from dataclasses import dataclass


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
