"""The call transcript: every model call and investigation tool call of one decision, in
order, as typed records (``orchestrator/domain/transcripts.py``) — the decision's event
history.

A record names its request by digest (sha256 of the canonical request) and its reply by
digest; the reply texts themselves travel beside the records (``Transcript.texts``) and
are stored content-addressed by the caller, never cut. Replies are scrubbed (secrets and
personal data) at this boundary, before anything can store them; the decision is still
made from the text as it came, and the record counts what scrubbing replaced.

Replay re-feeds a transcript through ``TranscriptPlayer``, which stands in for the gateway
and the tools: each call today's code makes must be the next record, with the same
request digest. Anything else is a ``Divergence`` naming the call. Nothing here reads or
writes a file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from orchestrator.domain.jsonwalk import valid_text
from orchestrator.domain.transcripts import CallError, CallPurpose, CallUsage, ModelCall, ToolCall
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest
from orchestrator.redaction import scrub

__all__ = [
    "Divergence",
    "Exchange",
    "Transcript",
    "TranscriptPlayer",
    "call_model",
    "request_digest",
    "text_digest",
    "valid_text",
]


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def request_digest(request: ModelRequest, purpose: CallPurpose) -> str:
    """sha256 of the canonical request: what was asked, and why."""
    canonical = json.dumps(
        {
            "purpose": purpose.value,
            "system": request.system,
            "prompt": request.prompt,
            "json_schema": request.json_schema,
            "max_tokens": request.max_tokens,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return text_digest(canonical)


@dataclass(frozen=True)
class Transcript:
    """Records in call order, and the texts they reference (digest → text)."""

    entries: tuple[ModelCall | ToolCall, ...] = ()
    texts: Mapping[str, str] = field(default_factory=dict)

    def plus(self, other: Transcript) -> Transcript:
        return Transcript((*self.entries, *other.entries), {**self.texts, **other.texts})

    @property
    def model_calls(self) -> tuple[ModelCall, ...]:
        return tuple(e for e in self.entries if isinstance(e, ModelCall))

    def reply_text(self, call: ModelCall) -> str | None:
        return self.texts.get(call.reply_sha256) if call.reply_sha256 else None


@dataclass(frozen=True)
class Exchange:
    """One model call: the reply as the loop reads it, and its record."""

    reply: ModelReply
    transcript: Transcript

    @property
    def lone_surrogates(self) -> int:
        """How many lone surrogates the reply held (its record says; replay agrees)."""
        return sum(call.lone_surrogates for call in self.transcript.model_calls)


def _record(
    reply: ModelReply, request: ModelRequest, purpose: CallPurpose
) -> tuple[ModelCall, Transcript]:
    stored, redactions, surrogates = None, 0, 0
    if reply.text is not None:
        valid, surrogates = valid_text(reply.text)
        stored, redactions = scrub(valid)
    digest = text_digest(stored) if stored is not None else None
    call = ModelCall(
        purpose=purpose,
        request_sha256=request_digest(request, purpose),
        reply_sha256=digest,
        reply_chars=len(stored) if stored is not None else 0,
        model=reply.model,
        stop_reason=reply.stop_reason,
        error=reply.failure,
        error_detail=valid_text(reply.error)[0] if reply.error is not None else None,
        usage=CallUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens),
        redactions=redactions,
        lone_surrogates=surrogates,
    )
    texts = {digest: stored} if digest is not None and stored is not None else {}
    return call, Transcript((call,), texts)


def call_model(gateway: ModelGateway, request: ModelRequest, purpose: CallPurpose) -> Exchange:
    """Ask ``gateway`` once and record the call. Never raises: a gateway that raises (a
    bug on our side) becomes a reply with ``CallError.GATEWAY_RAISED``."""
    if isinstance(gateway, TranscriptPlayer):
        return gateway.exchange(request, purpose)
    try:
        reply = gateway.complete(request)
    except Exception as exc:  # noqa: BLE001 -- a gateway bug must not escape the loop
        reply = ModelReply(
            text=None,
            model=gateway.model_name,
            error=type(exc).__name__,
            error_kind=CallError.GATEWAY_RAISED,
        )
    _, transcript = _record(reply, request, purpose)
    return Exchange(reply, transcript)


def tool_record(step: int, tool: str, args: Mapping[str, Any], result: str) -> Transcript:
    """The record of one investigation tool call, ``result`` already redacted and capped."""
    result = valid_text(result)[0]
    digest = text_digest(result)
    call = ToolCall(
        step=step, tool=tool, args=dict(args), result_sha256=digest, result_chars=len(result)
    )
    return Transcript((call,), {digest: result})


# ---- replay -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where today's code left the recorded history: ``index`` is the call's position."""

    index: int
    what: str  # "request", "reply", "kind", "missing" (not in the transcript), "unused"
    then: Any
    now: Any
    purpose: str = ""

    @property
    def name(self) -> str:
        label = f" ({self.purpose})" if self.purpose else ""
        return f"transcript.call[{self.index}]{label}.{self.what}"


NOT_IN_TRANSCRIPT: Final = "replay: the transcript has no such call"


@dataclass
class TranscriptPlayer:
    """Answers calls from a recorded transcript, in order; never reaches a model. A call
    the transcript does not have is answered with an error reply and noted."""

    entries: tuple[ModelCall | ToolCall, ...]
    texts: Mapping[str, str]
    model_name: str = "replay"
    position: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> ModelReply:
        return self.exchange(request, CallPurpose.DIAGNOSIS).reply

    def _next(self) -> ModelCall | ToolCall | None:
        if self.position >= len(self.entries):
            return None
        entry = self.entries[self.position]
        self.position += 1
        return entry

    def _text(self, index: int, digest: str | None, purpose: str) -> str | None:
        if digest is None:
            return None
        text = self.texts.get(digest)
        if text is None:
            self.divergences.append(Divergence(index, "reply", digest, "<missing>", purpose))
            return None
        actual = text_digest(text)
        if actual != digest:  # the stored reply was changed after the decision
            self.divergences.append(Divergence(index, "reply", digest, actual, purpose))
        return text

    def exchange(self, request: ModelRequest, purpose: CallPurpose) -> Exchange:
        index = self.position
        entry = self._next()
        digest = request_digest(request, purpose)
        if not isinstance(entry, ModelCall):
            self.divergences.append(
                Divergence(index, "missing", entry.kind if entry else "<none>", purpose.value)
            )
            reply = ModelReply(
                text=None,
                model=self.model_name,
                error=NOT_IN_TRANSCRIPT,
                error_kind=CallError.NOT_IN_TRANSCRIPT,
            )
            return Exchange(reply, _record(reply, request, purpose)[1])
        if entry.purpose != purpose or entry.request_sha256 != digest:
            self.divergences.append(
                Divergence(
                    index,
                    "request",
                    f"{entry.purpose.value} {entry.request_sha256}",
                    f"{purpose.value} {digest}",
                    entry.purpose.value,
                )
            )
        text = self._text(index, entry.reply_sha256, entry.purpose.value)
        reply = ModelReply(
            text=text,
            model=entry.model,
            stop_reason=entry.stop_reason,
            input_tokens=entry.usage.input_tokens,
            output_tokens=entry.usage.output_tokens,
            error=entry.error_detail,
            error_kind=entry.error,
        )
        texts = {entry.reply_sha256: text} if entry.reply_sha256 and text is not None else {}
        # The record as it was made: its redaction count describes the original reply.
        return Exchange(reply, Transcript((entry,), texts))

    def tool(self, tool: str, args: Mapping[str, Any]) -> str:
        """The recorded result of the next tool call (which must be this one)."""
        index = self.position
        entry = self._next()
        if not isinstance(entry, ToolCall):
            self.divergences.append(
                Divergence(index, "missing", entry.kind if entry else "<none>", f"tool {tool}")
            )
            return NOT_IN_TRANSCRIPT
        if (entry.tool, entry.args) != (tool, dict(args)):
            self.divergences.append(
                Divergence(
                    index,
                    "request",
                    f"{entry.tool} {json.dumps(entry.args, sort_keys=True)}",
                    f"{tool} {json.dumps(dict(args), sort_keys=True, default=str)}",
                    "tool",
                )
            )
        return self._text(index, entry.result_sha256, "tool") or ""

    def finish(self) -> list[Divergence]:
        """Every divergence, including recorded calls today's code never made."""
        for index in range(self.position, len(self.entries)):
            entry = self.entries[index]
            purpose = entry.purpose.value if isinstance(entry, ModelCall) else "tool"
            self.divergences.append(Divergence(index, "unused", entry.kind, "<not made>", purpose))
        self.position = len(self.entries)
        return list(self.divergences)
