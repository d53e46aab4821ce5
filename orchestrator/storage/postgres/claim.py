"""A ticket held by this worker on ``PostgresLeases`` (issue 30), kept by a heartbeat:
the PostgreSQL twin of the Redis fleet's ``coordination.claim``.

``claim(leases, ticket_id, ttl_s=...)`` wins the ticket's lease (or raises
``TicketClaimed`` naming the holder, without waiting), renews it every third of its time
to live on a daemon thread, and releases it when the block ends. What the block writes
presents ``PostgresClaim.fence`` (a ``LeaseToken``): ``StateMirror.publish`` checks it in
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

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from orchestrator.storage.heartbeat import BeatOutcome, Heartbeat
from orchestrator.storage.postgres.connect import PostgresUnavailable
from orchestrator.storage.postgres.leases import LeaseToken, PostgresLeases
from orchestrator.storage.redis.coordination import holder_token
from orchestrator.storage.redis.errors import TicketClaimed


class PostgresClaim:
    """A ticket's lease won by this worker, and the heartbeat renewing it
    (``storage/heartbeat.py``).

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
        self._heartbeat = Heartbeat(
            lambda: leases.renew(ticket_id, holder, token, ttl_s),
            unreachable=PostgresUnavailable,
            interval_s=interval_s if interval_s is not None else ttl_s / 3,
            name=f"pg-lease-heartbeat-{ticket_id}",
            _on_beat=_on_beat,
        )

    @property
    def fence(self) -> LeaseToken:
        """What a fenced write of this ticket's state presents."""
        return LeaseToken(self.ticket_id, self.token)

    @property
    def lost(self) -> bool:
        """True once a renewal found the ticket taken over (or released) by another."""
        return self._heartbeat.lost.is_set()

    @property
    def renewals(self) -> int:
        return self._heartbeat.renewals

    @property
    def last_error(self) -> str | None:
        return self._heartbeat.last_error

    def beat(self) -> BeatOutcome:
        """Renew the lease once, now: True renewed, False lost (and ``lost`` is set),
        None when the database could not be reached (``last_error`` says why)."""
        return self._heartbeat.beat()

    def _start_heartbeat(self) -> None:
        self._heartbeat.start()

    def _stop_heartbeat(self) -> None:
        """Stop renewing (at the block's end; a test seam to let the lease run out)."""
        self._heartbeat.stop()


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
        raise TicketClaimed(ticket_id, leases.holder(ticket_id) or "unknown")
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
