"""What a forge is to the orchestrator: the place where a pushed branch becomes a pull
request. Opening is idempotent: asked again for the same head and base, a forge answers
with the request it already has (``created=False``) rather than a second one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ForgeError(Exception):
    """A forge refused or could not be reached. ``str()`` is one line, free of secrets."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"ForgeError(kind={self.kind!r}, message={self.message!r})"


@dataclass(frozen=True)
class PullRequest:
    number: int  # the forge's number for it (the local forge has none: 0)
    url: str
    created: bool  # False: an open pull request for this head and base already existed


class Forge(Protocol):
    def open_pull_request(self, head: str, base: str, title: str, body: str) -> PullRequest:
        """Open a pull request of ``head`` into ``base``, or return the one already open."""
        ...
