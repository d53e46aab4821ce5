"""A batch stops asking a model that refused its key.

A wrong or revoked key fails every call the same way (401), and each failed call was a
diagnosis charged to its ticket for nothing. Once one call of a batch is refused for its
key, every later decision of that batch waits, undecided and uncharged
(``Unavailable.defer``), for a batch run after a person has fixed the key; the batch
says so once. Beside ``budgeted_calls.py``, the other wrapper a batch puts around its
gateway factory.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.transcripts import CallError
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, Unavailable

GatewayFactory = Callable[[], ModelGateway | Unavailable | None]


class RefusedKeyLatch:
    """A gateway factory that hands out nothing once the model refused its key."""

    def __init__(self, inner: GatewayFactory, key_env: str, say: Callable[[str], None]) -> None:
        self._inner = inner
        self._key_env = key_env
        self._say = say
        self.refused: str | None = None

    def __call__(self) -> ModelGateway | Unavailable | None:
        if self.refused is not None:
            return Unavailable(self.refused, defer=True)
        gateway = self._inner()
        if isinstance(gateway, Unavailable) and gateway.halt is HaltReason.AUTH_ERROR:
            # Refused before any call (the factory asked once): every decision of the
            # batch waits, this one too, uncharged.
            self._refuse()
            return Unavailable(self.refused or gateway.reason, defer=True)
        if gateway is None or isinstance(gateway, Unavailable):
            return gateway
        return _Watched(gateway, self)

    def saw(self, reply: ModelReply) -> None:
        if reply.error_kind is CallError.AUTHENTICATION:
            self._refuse()

    def _refuse(self) -> None:
        if self.refused is None:
            self.refused = (
                f"the model refused its key (${self._key_env}): not asked again in this batch"
            )
            self._say(
                f"{self.refused}; the decisions it would have made wait for the next batch "
                f"(fix ${self._key_env} first)"
            )


class _Watched:
    def __init__(self, inner: ModelGateway, latch: RefusedKeyLatch) -> None:
        self._inner = inner
        self._latch = latch
        self.model_name = inner.model_name

    def complete(self, request: ModelRequest) -> ModelReply:
        reply = self._inner.complete(request)
        self._latch.saw(reply)
        return reply
