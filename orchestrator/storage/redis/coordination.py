"""The per-ticket claim across machines: a lease with a fencing token.

A worker claims a ticket by setting ``<ns>:ticket:<id>:lease`` to a random holder token,
only if absent, with an expiry; a heartbeat renews it while the run goes on, and only the
holder may release it (compare-and-delete). A process paused past its lease loses it to
the next worker, and cannot know it was paused, so winning a lease also takes a
*fencing token*: a per-ticket counter (``<ns>:ticket:<id>:fence``) incremented on every
win, stored with the winner's holder token. Before each write of the ticket's state the
writer checks the counter is still its own (``RedisFence.check``): a worker that was
taken over is refused with ``FencedOut`` naming both tokens.

The fence hash has no expiry, so the counter only grows. If Redis loses it (a restart
without persistence), every holder's check fails rather than trusting a counter that
started again from zero: the safe side; run Redis with persistence (appendonly) to keep
running tickets through a restart.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from orchestrator.storage.heartbeat import Heartbeat as LeaseHeartbeat
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.errors import CoordinationUnavailable, FencedOut, TicketClaimed

# Both keys are written in one script, so a lease never exists without its fencing token.
# A lease already holding this call's token was won by this very call: the client sends a
# command again when its answer was lost (a dropped connection, a restart between running
# it and answering), and the token is new for each call. That win is this worker's, with
# the fencing token it took, not "claimed by another worker" for a whole lease.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('HSET', KEYS[2], 'holder', ARGV[1])
  return {1, n, ARGV[1]}
end
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  return {1, tonumber(redis.call('HGET', KEYS[2], 'n')), ARGV[1]}
end
return {0, 0, current or ''}
"""

# 1: still ours, extended. 2: it had expired but nobody took the ticket since (the fence
# still names us), so it is ours again. 0: lost to another holder.
_RENEW = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not current and redis.call('HGET', KEYS[2], 'holder') == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"""

# 1: given back. Also 1 when the lease is gone and the fence still names this holder: its
# own earlier release, sent again after the answer was lost (or it ran out and nobody took
# the ticket since). 0: another holder's lease, left alone.
_RELEASE = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
if not current and redis.call('HGET', KEYS[2], 'holder') == ARGV[1] then
  return 1
end
return 0
"""

DEFAULT_LEASE_S = 60.0


def holder_token() -> str:
    """Who holds a lease, readable in an error (host and pid), and unguessable."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


@dataclass(frozen=True)
class Lease:
    ticket_id: str
    holder: str  # this worker's random token, stored as the lease's value
    fence: int  # the fencing token taken when the lease was won
    ttl_s: float


@dataclass(frozen=True)
class HeldElsewhere:
    """The lease is someone else's: ``holder`` is their token (host:pid:random)."""

    ticket_id: str
    holder: str


class TicketLeases:
    """Acquire, renew, release and fence per-ticket leases in one store."""

    def __init__(self, store: CoordinationStore, *, ttl_s: float = DEFAULT_LEASE_S) -> None:
        if ttl_s <= 0:
            raise ValueError("a lease needs a positive time to live")
        self.store = store
        self.ttl_s = ttl_s
        self._acquire = store.script(_ACQUIRE)
        self._renew = store.script(_RENEW)
        self._release = store.script(_RELEASE)

    def _keys(self, ticket_id: str) -> tuple[str, str]:
        return self.store.key("ticket", ticket_id, "lease"), self.store.key(
            "ticket", ticket_id, "fence"
        )

    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def acquire(self, ticket_id: str, *, holder: str | None = None) -> Lease | HeldElsewhere:
        """Win the ticket's lease (and a new fencing token), or learn who holds it."""
        token = holder or holder_token()
        won, fence, current = self._acquire(self._keys(ticket_id), [token, self._ttl_ms()])
        if int(won) == 1:
            return Lease(ticket_id, token, int(fence), self.ttl_s)
        return HeldElsewhere(ticket_id, str(current))

    def renew(self, lease: Lease) -> bool:
        """Extend the lease; False once another worker has taken the ticket."""
        return int(self._renew(self._keys(lease.ticket_id), [lease.holder, self._ttl_ms()])) > 0

    def release(self, lease: Lease) -> bool:
        """Give the lease up; False when it was no longer ours (nothing is deleted then)."""
        return int(self._release(self._keys(lease.ticket_id), [lease.holder])) == 1

    def fence(self, lease: Lease) -> RedisFence:
        return RedisFence(self.store, self._keys(lease.ticket_id)[1], lease)


class RedisFence:
    """``check()`` before every state write of the lease's ticket (see ``fence.Fence``)."""

    def __init__(self, store: CoordinationStore, key: str, lease: Lease) -> None:
        self._store = store
        self._key = key
        self.lease = lease

    def check(self) -> None:
        counter, holder = self._store.call(lambda client: client.hmget(self._key, ["n", "holder"]))
        current = int(counter) if counter is not None else None
        if current == self.lease.fence and holder == self.lease.holder:
            return
        raise FencedOut(
            self.lease.ticket_id,
            self.lease.fence,
            current,
            holder if isinstance(holder, str) else None,
        )


class Heartbeat(LeaseHeartbeat):
    """Renews a lease every third of its time to live (``storage/heartbeat.py``) until
    stopped or lost. ``lost`` is set when another worker took the ticket; a store that
    cannot be reached is retried on the next beat (the lease may still be valid) and
    remembered in ``last_error``. Use as a context manager around the run. (``_on_beat``
    hears each beat: True renewed, False lost, None unreachable.)"""

    def __init__(
        self,
        leases: TicketLeases,
        lease: Lease,
        *,
        interval_s: float | None = None,
        _on_beat: Callable[[bool | None], None] | None = None,
    ) -> None:
        super().__init__(
            lambda: leases.renew(lease),
            unreachable=CoordinationUnavailable,
            interval_s=interval_s if interval_s is not None else lease.ttl_s / 3,
            name=f"lease-heartbeat-{lease.ticket_id}",
            _on_beat=_on_beat,
        )
        self.leases = leases
        self.lease = lease


@dataclass(frozen=True)
class Claim:
    """A ticket held by this worker: its lease, the fence its stores check, and the
    heartbeat keeping it (``heartbeat.lost`` says when another worker took it)."""

    lease: Lease
    fence: RedisFence
    heartbeat: LeaseHeartbeat


@contextmanager
def claim(leases: TicketLeases, ticket_id: str) -> Iterator[Claim]:
    """Hold ``ticket_id`` for the block: win its lease (or raise ``TicketClaimed`` naming
    the holder, without waiting), renew it on a heartbeat, release it at the end."""
    won = leases.acquire(ticket_id)
    if isinstance(won, HeldElsewhere):
        raise TicketClaimed(ticket_id, won.holder)
    try:
        with Heartbeat(leases, won) as heartbeat:
            yield Claim(won, leases.fence(won), heartbeat)
    finally:
        # A lease already taken over is not ours to delete (release checks), and a store
        # that is down lets the lease run out by itself.
        with suppress(CoordinationUnavailable):
            leases.release(won)
