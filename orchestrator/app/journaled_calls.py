"""The gateways a decision is handed: each charged to the ticket before its first live
call, and each reply journaled as it arrives, so a decision resumed after a kill is
answered from the journal instead of asking the model again.

    decision starts ─► recorded replies (from a killed attempt at this decision, if any)
    gateway.complete(request)
      ├─ the next recorded reply was for this request ─► that reply: no call, no charge
      └─ otherwise ─► charge (once per gateway) ─► the model ─► journal ─► reply

The recovery graph is deterministic, so a resumed decision asks the same requests in
the same order and reaches the decision the killed process would have. The first
request that differs (its inputs changed) ends the replay: from there on it asks.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import asdict

from orchestrator.domain.transcripts import CallError
from orchestrator.recovery.gateway import (
    GatewayFactory,
    ModelGateway,
    ModelReply,
    ModelRequest,
    Unavailable,
)
from orchestrator.storage import JournaledReply


def request_sha256(request: ModelRequest) -> str:
    canonical = json.dumps(
        {
            "system": request.system,
            "prompt": request.prompt,
            "json_schema": request.json_schema,
            "max_tokens": request.max_tokens,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


# A journaled reply is the reply's own fields by their names, its error kind as a string.
def journaled(digest: str, reply: ModelReply) -> JournaledReply:
    kind = reply.error_kind.value if reply.error_kind else None
    return JournaledReply(**{**asdict(reply), "error_kind": kind}, request_sha256=digest)


def replayed(entry: JournaledReply) -> ModelReply:
    kind = CallError(entry.error_kind) if entry.error_kind else None
    return ModelReply(**entry.model_dump(exclude={"request_sha256", "error_kind"}), error_kind=kind)


class JournaledGateway:
    def __init__(
        self,
        inner: ModelGateway,
        recorded: deque[JournaledReply],
        charge: Callable[[], None],
        record: Callable[[JournaledReply], None],
    ) -> None:
        self.model_name = inner.model_name
        self._inner = inner
        self._recorded = recorded  # shared by the decision's gateways: one call order
        self._charge = charge
        self._record = record
        self._charged = False

    def complete(self, request: ModelRequest) -> ModelReply:
        digest = request_sha256(request)
        if self._recorded and self._recorded[0].request_sha256 == digest:
            # The killed process charged this gateway before making this call; its
            # later calls are covered by that charge, as they would have been.
            self._charged = True
            return replayed(self._recorded.popleft())
        self._recorded.clear()  # the calls went another way: nothing later can match
        if not self._charged:
            self._charge()  # persisted before the call: a crash never refunds it
            self._charged = True
        reply = self._inner.complete(request)
        try:
            self._record(journaled(digest, reply))
        except OSError:
            pass  # unjournaled, only a resume after a kill would ask again: not worth failing
        return reply


def journaled_factory(
    factory: GatewayFactory,
    recorded: deque[JournaledReply],
    charge: Callable[[], None],
    record: Callable[[JournaledReply], None],
) -> GatewayFactory:
    """``factory``'s gateways, journaled and charged (no gateway, none charged)."""

    def build() -> ModelGateway | Unavailable | None:
        gateway = factory()
        if gateway is None or isinstance(gateway, Unavailable):
            return gateway
        return JournaledGateway(gateway, recorded, charge, record)

    return build
