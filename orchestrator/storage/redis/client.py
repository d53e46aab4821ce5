"""The one door to Redis: a connection pool, its Lua scripts, and error translation.

Nothing else in the orchestrator imports the redis client, and this module imports it
only when a store is opened, so the local mode never pays for it (nor needs it
installed). Every call turns the client's connection errors into
``CoordinationUnavailable`` naming the store by its masked URL: the rest of the code never
sees a redis exception type, and no message carries the password.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.errors import CoordinationUnavailable

if TYPE_CHECKING:
    from redis import Redis
    from redis.commands.core import Script

T = TypeVar("T")

# Long enough for a loaded server, short enough that a dead one is reported while the
# caller can still act (a heartbeat renews well inside a lease).
DEFAULT_TIMEOUT_S = 5.0


class Lua:
    """A Lua script run atomically by the server (loaded once per connection pool, and
    again by the client after a server restart flushed its script cache)."""

    def __init__(self, store: CoordinationStore, source: str) -> None:
        self._store = store
        self._script: Script = store.client.register_script(source)

    def __call__(self, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        return self._store.call(lambda _client: self._run(list(keys), list(args)))

    def _run(self, keys: list[str], args: list[str | int | float]) -> Any:
        from redis.exceptions import NoScriptError

        try:
            return self._script(keys=keys, args=args)
        except NoScriptError:
            # The client's own reload covers a cache flushed *before* the call. A server
            # that restarts between that reload and the run it retries (the client's
            # retry of a refused connection lands on the new, empty server) flushes it
            # again; one more reload covers that. A third flush in one call is not a race
            # but a server that keeps no scripts, and is reported as it is.
            return self._script(keys=keys, args=args)


class CoordinationStore:
    """One Redis, named by a ``BrokerUrl``; keys are prefixed with ``namespace``."""

    def __init__(
        self,
        url: BrokerUrl,
        *,
        namespace: str = "orchestrator",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = 2,
    ) -> None:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        self.url = url
        self.namespace = namespace
        self.client: Redis = redis.Redis.from_url(
            url.reveal(),
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            # A server that is restarting is retried briefly; one that is gone is reported
            # within about a second, not after the client's own long back-off.
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries),
        )

    def key(self, *parts: str) -> str:
        return ":".join((self.namespace, *parts))

    def script(self, source: str) -> Lua:
        return Lua(self, source)

    def call(self, operation: Callable[[Redis], T]) -> T:
        """Run ``operation`` on the client; a connection failure becomes
        ``CoordinationUnavailable`` (the next call reconnects by itself)."""
        import redis.exceptions

        try:
            return operation(self.client)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            raise self.unavailable(self.url.scrub(str(exc)) or type(exc).__name__) from None

    def unavailable(self, reason: str, after: str = "") -> CoordinationUnavailable:
        """The error that names this store (masked) and ``reason`` (already scrubbed),
        with ``after`` said after it."""
        return CoordinationUnavailable(
            f"coordination store unavailable: {self.url.masked}: {reason}{after}", reason
        )

    def ping(self) -> None:
        self.call(lambda client: client.ping())

    def close(self) -> None:
        self.client.close()
