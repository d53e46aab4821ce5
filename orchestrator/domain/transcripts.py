"""The records of a decision's call transcript: one per model call and per investigation
tool call, in order, as the verdict file keeps them (``AuditMemory.transcript``).

A record names its request by digest (sha256 of the canonical request) and its reply by
digest; the texts are stored beside it, content-addressed. Only the records live here:
making them, and replaying them, is ``orchestrator/recovery/transcript.py``; the gateway
that answers a call is ``orchestrator/recovery/gateway.py``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from orchestrator.domain.validation import Frozen

__all__ = [
    "CallError",
    "CallPurpose",
    "CallUsage",
    "ModelCall",
    "ToolCall",
    "TranscriptEntry",
]


class CallError(StrEnum):
    """Why a call gave no usable text: a closed set, so a transcript says what happened
    without naming an SDK's (or Python's) exception classes."""

    GATEWAY_RAISED = "gateway_raised"  # our gateway code raised: a bug, not the model
    NO_TEXT = "no_text"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    RATE_LIMITED = "rate_limited"
    AUTHENTICATION = "authentication"
    SERVER = "server"
    API = "api"
    MALFORMED = "malformed"
    MAX_TOKENS = "max_tokens"
    REFUSED = "refused"
    STOPPED = "stopped"  # any other stop reason
    OTHER = "other"
    NOT_IN_TRANSCRIPT = "not_in_transcript"  # replay: today's code made a call never made


class CallPurpose(StrEnum):
    DIAGNOSIS = "diagnosis"
    REASK = "reask"  # a diagnosis asked again after a reply that failed validation
    JUDGE = "judge"
    INVESTIGATION = "investigation"  # one step of the bounded investigation


class CallUsage(Frozen):
    input_tokens: int = 0
    output_tokens: int = 0


class ModelCall(Frozen):
    kind: Literal["model"] = "model"
    purpose: CallPurpose
    request_sha256: str
    reply_sha256: str | None  # None: no text came back
    reply_chars: int = 0
    model: str
    stop_reason: str | None = None
    error: CallError | None = None
    error_detail: str | None = None  # the gateway's key-free description
    usage: CallUsage = CallUsage()
    redactions: int = 0  # what scrubbing replaced in the stored reply
    # Lone surrogates in the reply (text with no UTF-8 form) replaced by U+FFFD in the
    # stored text: a reply that had any is refused, live and on replay alike.
    lone_surrogates: int = 0


class ToolCall(Frozen):
    kind: Literal["tool"] = "tool"
    step: int
    tool: str
    args: dict[str, Any]
    result_sha256: str
    result_chars: int


TranscriptEntry = Annotated[ModelCall | ToolCall, Field(discriminator="kind")]
