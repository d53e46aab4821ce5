"""What coordination can refuse, as typed errors the CLI maps to an exit code.

    OrchestratorError
    ├── CoordinationUnavailable  the coordination store cannot be reached (URL masked)
    ├── TicketClaimed            another worker holds the ticket's lease
    ├── FencedOut                another worker took the ticket over: nothing is written
    ├── LockTimeout              a lock stayed held past the bounded wait
    └── LockLost                 a lock expired while held: what it guarded may have raced

All of them are "try again later" conditions for a worker (EX_TEMPFAIL), not bugs.
"""

from __future__ import annotations

from orchestrator.domain.errors import EXIT_LOCKED, OrchestratorError


class CoordinationError(OrchestratorError):
    exit_code = EXIT_LOCKED


class CoordinationUnavailable(CoordinationError):
    """The store did not answer; the message names it by its masked URL. ``reason`` is
    what went wrong alone (scrubbed), for a caller that says more around it."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class TicketClaimed(CoordinationError):
    """The ticket's lease is another worker's: this one skips it, never waits for it."""

    def __init__(self, ticket_id: str, holder: str) -> None:
        self.ticket_id = ticket_id
        self.holder = holder
        super().__init__(f"ticket {ticket_id} is claimed by another worker ({holder})")


class FencedOut(CoordinationError):
    """A write was refused because the ticket's fencing token moved on: the lease this
    worker held expired (it was paused, or cut off) and another worker took the ticket."""

    def __init__(
        self, ticket_id: str, held: int, current: int | None, holder: str | None = None
    ) -> None:
        self.ticket_id = ticket_id
        self.held = held
        self.current = current
        self.holder = holder
        if current is None:
            why = (
                "the coordination store has no record of its lease (was Redis restarted "
                "without persistence?)"
            )
        else:
            who = f" by {holder}" if holder else ""
            why = f"another worker took it over{who} (current fencing token {current})"
        super().__init__(
            f"fenced out: ticket {ticket_id}: this worker's fencing token is {held}, but "
            f"{why}; nothing was written, the ticket is the other worker's now"
        )


class LockTimeout(CoordinationError):
    pass


class LockLost(CoordinationError):
    pass
