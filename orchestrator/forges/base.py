"""What a forge is to the orchestrator: the place where a pushed branch becomes a pull
request. Opening is idempotent: asked again for the same head and base, a forge answers
with the request it already has (``created=False``) rather than a second one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class ForgeError(Exception):
    """A forge refused or could not be reached. ``str()`` is one line, free of secrets.
    ``retry_at``: for ``rate_limited``, the epoch the forge said to ask again at (past the
    wait this process allows: the next batch asks), else None."""

    def __init__(self, kind: str, message: str, *, retry_at: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_at = retry_at

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


@dataclass(frozen=True)
class Refusal:
    """A forge's no to opening a request; ``lost_race``: its reason is that one is open
    already (opened by someone else between our look and our ask)."""

    error: ForgeError
    lost_race: bool = False


def open_or_reuse(
    find: Callable[[], PullRequest | None], create: Callable[[], PullRequest | Refusal]
) -> PullRequest:
    """The idempotent open every forge shares: the open request ``find`` finds, else the
    one ``create`` makes; a create that lost a race, or whose answer was a 5xx or never
    came (``outage``), is answered by looking again."""
    existing = find()
    if existing is not None:
        return existing
    try:
        made = create()
    except ForgeError as exc:
        if exc.kind != "outage":
            raise
        made = Refusal(exc)
    if isinstance(made, PullRequest):
        return made
    if made.lost_race or made.error.kind == "outage":
        # Lost race: someone (a concurrent run, a person) opened it between our look and
        # our ask. Outage: a create is never sent twice (it is not idempotent), but the
        # forge may have made it before failing to answer (issue 43): look before failing.
        existing = find()
        if existing is not None:
            return existing
    raise made.error


class OpensIdempotently:
    """``open_pull_request`` for a forge that can ``_find_open`` and ``_create``."""

    __slots__ = ()

    def open_pull_request(self, head: str, base: str, title: str, body: str) -> PullRequest:
        """The open request of ``head`` into ``base``: the existing one, else a new one."""
        return open_or_reuse(
            lambda: self._find_open(head, base), lambda: self._create(head, base, title, body)
        )

    def _find_open(self, head: str, base: str) -> PullRequest | None:
        raise NotImplementedError

    def _create(self, head: str, base: str, title: str, body: str) -> PullRequest | Refusal:
        raise NotImplementedError
