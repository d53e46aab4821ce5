"""A lock in Redis for what must happen one process at a time across machines: the
ledger's appends (each reads the head, then writes the next hash-chained row).

``flock`` on a network filesystem is unreliable (NFS emulates it, some mounts ignore it),
so the fleet's writers take this one instead: set-if-absent with a random token and an
expiry (a crashed holder cannot keep it forever), released only by its holder
(compare-and-delete). A waiter waits a bounded time, then gets ``LockTimeout`` naming the
lock and its holder. If the lock expired while held (the holder was paused longer than
its expiry), releasing it raises ``LockLost``: the appends it guarded may have raced,
and ``orchestrator ledger verify`` says whether they did.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import holder_token
from orchestrator.storage.redis.errors import CoordinationError, LockLost, LockTimeout

# The client sends a command again when its answer was lost (a dropped connection, a
# restart between running it and answering); each holder's token is new. So a lock
# already holding this holder's token was taken by its own earlier send, and a release
# finds the note its own earlier send left (kept as long as a lock would be): neither is
# a wait until the lock expires, nor "expired while held" after an append that went well.
_TAKE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  return 1
end
return 0
"""

DEFAULT_TTL_S = 30.0
DEFAULT_WAIT_S = 30.0
# Waiters poll: the first retries come quickly (an append holds the lock for
# milliseconds), later ones back off so a crowd of waiters does not hammer the server.
FIRST_PAUSE_S = 0.001
MAX_PAUSE_S = 0.05


class RedisLock:
    def __init__(
        self,
        store: CoordinationStore,
        name: str,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        wait_s: float = DEFAULT_WAIT_S,
        _clock: Callable[[], float] = time.monotonic,
        _pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.name = name
        self.key = store.key("lock", name)
        self._released_key = store.key("lock", name, "released")
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self._clock = _clock
        self._pause = _pause
        self._take = store.script(_TAKE)
        self._release = store.script(_RELEASE)

    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def _try(self, token: str) -> bool:
        return int(self._take([self.key], [token, self._ttl_ms()])) == 1

    def acquire(self) -> str:
        """Wait (at most ``wait_s``) for the lock; return the token that releases it."""
        token = holder_token()
        deadline = self._clock() + self.wait_s
        pause = FIRST_PAUSE_S
        while not self._try(token):
            left = deadline - self._clock()
            if left <= 0:
                holder = self.store.call(lambda c: c.get(self.key))
                who = holder if isinstance(holder, str) else "nobody (just released)"
                raise LockTimeout(
                    f"lock {self.name!r} is still held by {who} "
                    f"after waiting {self.wait_s:g} s; it expires by itself "
                    f"{self.ttl_s:g} s after its holder took it"
                )
            self._pause(min(pause, left))
            pause = min(pause * 2, MAX_PAUSE_S)
        return token

    def still_held(self, token: str) -> bool:
        """Whether ``token`` holds the lock now: for a last check just before the write."""
        return bool(self.store.call(lambda c: c.get(self.key)) == token)

    def release(self, token: str) -> None:
        released = self._release([self.key, self._released_key], [token, self._ttl_ms()])
        if int(released) != 1:
            raise LockLost(
                f"lock {self.name!r} expired while held (its holder was paused or slow past "
                f"{self.ttl_s:g} s): another process may have taken it meanwhile"
            )

    @contextmanager
    def held(self) -> Iterator[str]:
        """Hold the lock around the block. A lock lost while held is reported after a
        block that succeeded; after a failing block the block's own error wins."""
        token = self.acquire()
        try:
            yield token
        except BaseException:
            with suppress(CoordinationError):
                self.release(token)
            raise
        self.release(token)


def ledger_lock(
    store: CoordinationStore, *, ttl_s: float = DEFAULT_TTL_S, wait_s: float = DEFAULT_WAIT_S
) -> RedisLock:
    """The lock every worker of the fleet takes around a ledger append."""
    return RedisLock(store, "ledger", ttl_s=ttl_s, wait_s=wait_s)
