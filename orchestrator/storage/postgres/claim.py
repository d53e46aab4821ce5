"""A ticket held by this worker on ``PostgresLeases`` (issue 30), kept by a heartbeat:
the PostgreSQL twin of the Redis fleet's ``coordination.claim``.

``claim(leases, ticket_id, ttl_s=...)`` wins the ticket's lease (or raises
``TicketClaimed`` naming the holder, without waiting), renews it every third of its time
to live on a daemon thread, and releases it when the block ends. What the block writes
presents ``PostgresClaim.fence`` (a ``LeaseToken``): ``PostgresRuns.save`` checks it in
the transaction that writes, so a worker whose lease ran out is refused there.

The heartbeat and the database going away
    A renewal that cannot reach the database (``PostgresUnavailable``: the server is
    restarting, the network is cut) is tried again at the next beat; the claim is not
    given up. The lease may run out meanwhile; if nobody took the ticket, the next renewal
    takes it back (``PostgresLeases.renew`` accepts an expired lease whose token is still
    the current one), and if somebody did, the fenced writes refuse this worker: that is
    the safety, not the heartbeat. A renewal that answers False (another holder's token
    now) marks the claim ``lost`` and the heartbeat stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from orchestrator.domain.errors import StateError
from orchestrator.storage.postgres.connect import PostgresUnavailable
from orchestrator.storage.postgres.runs import WHERE, LeaseToken, PostgresLeases
from orchestrator.storage.postgres.session import transaction
from orchestrator.storage.redis.coordination import holder_token
from orchestrator.storage.redis.errors import TicketClaimed

# What a beat heard: True renewed, False lost to another holder, None unreachable.
BeatOutcome = bool | None


class PostgresClaim:
    """A ticket's lease won by this worker, and the heartbeat renewing it.

    ``fence`` is what its fenced writes present; ``lost`` turns True once a renewal found
    the ticket another holder's; ``last_error`` is the last renewal's failure to reach the
    database (None after a renewal that reached it); ``renewals`` counts the renewals
    that kept the lease. (``_on_beat`` hears each beat's outcome, after it is recorded.)"""

    def __init__(
        self,
        leases: PostgresLeases,
        ticket_id: str,
        holder: str,
        token: int,
        ttl_s: float,
        *,
        interval_s: float | None = None,
        _on_beat: Callable[[BeatOutcome], None] | None = None,
    ) -> None:
        self.ticket_id = ticket_id
        self.holder = holder
        self.token = token
        self.ttl_s = ttl_s
        self.interval_s = interval_s if interval_s is not None else ttl_s / 3
        self.renewals = 0
        self.last_error: str | None = None
        self._leases = leases
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._on_beat = _on_beat
        self._thread = threading.Thread(
            target=self._beat_until_stopped,
            name=f"pg-lease-heartbeat-{ticket_id}",
            daemon=True,
        )

    @property
    def fence(self) -> LeaseToken:
        """What a fenced write of this ticket's state presents."""
        return LeaseToken(self.ticket_id, self.token)

    @property
    def lost(self) -> bool:
        """True once a renewal found the ticket taken over (or released) by another."""
        return self._lost.is_set()

    def beat(self) -> BeatOutcome:
        """Renew the lease once, now: True renewed, False lost (and ``lost`` is set),
        None when the database could not be reached (``last_error`` says why)."""
        if self._lost.is_set():
            outcome: BeatOutcome = False
        else:
            try:
                held = self._leases.renew(self.ticket_id, self.holder, self.token, self.ttl_s)
            except PostgresUnavailable as exc:
                self.last_error = str(exc)
                outcome = None
            else:
                self.last_error = None
                if held:
                    self.renewals += 1
                else:
                    self._lost.set()
                outcome = held
        if self._on_beat is not None:
            self._on_beat(outcome)
        return outcome

    def _beat_until_stopped(self) -> None:
        # An Event's wait, not a sleep: stopping the heartbeat wakes it at once.
        while not self._stop.wait(self.interval_s):
            if self.beat() is False:
                return

    def _start_heartbeat(self) -> None:
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        """Stop renewing (at the block's end; a test seam to let the lease run out)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


@contextmanager
def claim(
    leases: PostgresLeases,
    ticket_id: str,
    *,
    ttl_s: float,
    holder: str | None = None,
    _on_beat: Callable[[BeatOutcome], None] | None = None,
) -> Iterator[PostgresClaim]:
    """Hold ``ticket_id`` for the block: win its lease for ``holder`` (by default
    ``<host>:<pid>:<random>``) or raise ``TicketClaimed`` naming the holder, renew it every
    ``ttl_s / 3`` on a heartbeat, and release it at the end."""
    who = holder or holder_token()
    token = leases.acquire(ticket_id, who, ttl_s)
    if token is None:
        raise TicketClaimed(ticket_id, _holder_of(leases, ticket_id))
    held = PostgresClaim(leases, ticket_id, who, token, ttl_s, _on_beat=_on_beat)
    held._start_heartbeat()
    try:
        yield held
    finally:
        held._stop_heartbeat()
        # A lease already taken over is not ours to release (release checks the holder
        # and token), and a database that is down lets the lease run out by itself.
        with suppress(PostgresUnavailable):
            leases.release(ticket_id, who, token)


def _holder_of(leases: PostgresLeases, ticket_id: str) -> str:
    """Who holds the ticket, for the refusal's message: ``acquire`` answers None alone.
    Asked on the leases' own connections; "unknown" when the lease was released between
    the refused acquire and this question, or the database went away meanwhile."""
    try:
        with transaction(
            leases._connect, says=f"state error: {WHERE}", error=StateError, unavailable=WHERE
        ) as conn:
            found = conn.execute(
                "SELECT holder FROM ticket_leases WHERE ticket_id = %s "
                "AND expires_at > clock_timestamp()",
                (ticket_id,),
            ).fetchone()
    except PostgresUnavailable:
        return "unknown"
    return str(found[0]) if found is not None and found[0] is not None else "unknown"
