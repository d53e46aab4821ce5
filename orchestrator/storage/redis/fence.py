"""The seam every state write of a ticket goes through: ``fence.check()`` just before it.

A worker that was paused past its lease (a long GC, a SIGSTOP, a frozen VM) must not
write the ticket's state after another worker took it over. Locally one process holds
the ticket's flock for the whole run, so the fence is a no-op; a distributed worker
holds a Redis fence (``coordination.RedisFence``), which raises ``FencedOut``.

The fenced stores check before a write begins and again right before each of its files
is renamed into place (``storage._atomic.checked_before_replace``), which narrows the
window to the time between that check's answer and the rename; it does not close it,
since a shared filesystem cannot compare a token on write.
"""

from __future__ import annotations

from typing import Protocol


class Fence(Protocol):
    def check(self) -> None:
        """Return if this process may still write the ticket's state; else raise
        ``FencedOut`` naming the ticket, the token held and the current one."""
        ...


class NoFence:
    """The local mode's fence: the ticket's flock already excludes every other writer."""

    def check(self) -> None:
        return None


NO_FENCE: Fence = NoFence()
