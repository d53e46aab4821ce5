"""The seam between the recovery loop and a model: one request in, one reply out.

A gateway never raises for anything the model or the network did: timeouts, refusals,
rate limits and server errors come back as a ``ModelReply`` with ``error`` set, so the
loop has exactly one path for "no usable answer" (→ ``abandon-human``). The SDK's
exception types never leave the gateway module that imports the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.transcripts import CallError


@dataclass(frozen=True)
class ModelRequest:
    system: str
    prompt: str
    json_schema: Mapping[str, Any]
    max_tokens: int


@dataclass(frozen=True)
class ModelReply:
    """What came back. ``text`` is the model's text when it finished normally
    (``stop_reason == "end_turn"``); otherwise ``error`` says why there is none."""

    text: str | None
    model: str
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None  # a short, key-free description
    error_kind: CallError | None = None  # set by gateways that know; else OTHER

    @property
    def failure(self) -> CallError | None:
        """The typed reason there is no usable text, or None."""
        if self.error is not None:
            return self.error_kind or CallError.OTHER
        return CallError.NO_TEXT if self.text is None else None


@dataclass(frozen=True)
class Unavailable:
    """A gateway factory's way of saying "not now, and why": no call is made. With
    ``defer`` (a spent batch budget: a later batch has a fresh one) the decision is not
    made at all and the run waits; without it the diagnosis becomes a synthetic
    abandon-human with this reason, halted with ``halt`` (a spent budget unless said:
    ``no_model`` for a missing key, ``auth_error`` for a key the model refused)."""

    reason: str
    defer: bool = False
    halt: HaltReason | None = None


class ModelGateway(Protocol):
    model_name: str

    def complete(self, request: ModelRequest) -> ModelReply: ...


# What the loop is given instead of a gateway: it builds one only when it must ask.
GatewayFactory = Callable[[], "ModelGateway | Unavailable | None"]


def charged_factory(factory: GatewayFactory, charge: Callable[[], None]) -> GatewayFactory:
    """Hand out a gateway only after ``charge`` has spent (and its caller persisted) one
    diagnosis for it: the decision asks for a gateway right before its call, so a call
    is never made uncharged and a crash after the charge never refunds it. No gateway (no
    model, a spent batch budget) is not charged."""

    def build() -> ModelGateway | Unavailable | None:
        gateway = factory()
        if gateway is None or isinstance(gateway, Unavailable):
            return gateway
        charge()
        return gateway

    return build


@dataclass
class ScriptedGateway:
    """A gateway that answers from a script: a list of texts (or replies, or callables of
    the request). Records every request, so tests can count calls and read prompts."""

    script: list[str | ModelReply | Callable[[ModelRequest], ModelReply]]
    model_name: str = "scripted"
    requests: list[ModelRequest] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if not self.script:
            raise AssertionError("ScriptedGateway: called more often than scripted")
        step = self.script.pop(0)
        if isinstance(step, ModelReply):
            return step
        if isinstance(step, str):
            return ModelReply(
                text=step,
                model=self.model_name,
                stop_reason="end_turn",
                input_tokens=len(request.prompt) // 4,
                output_tokens=len(step) // 4,
            )
        return step(request)

    @property
    def calls(self) -> int:
        return len(self.requests)
