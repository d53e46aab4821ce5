"""The Anthropic Messages API, as Claude Code and litellm (aider) call it, on the scripted
model server (``model_server.py``).

    server = anthropic_server([
        reply(tool_use("Write", {"file_path": "/abs/x.py", "content": "..."}), usage=...),
        reply(text("Done.")),
    ])
    with server: ...  # ANTHROPIC_BASE_URL=server.url

``POST /v1/messages`` takes the next step of the script: a model turn (``reply``: text
and tool_use blocks, streamed as SSE when the request says ``stream``, else one JSON
message, with usage including cache tokens) or an error (``error``: 401
authentication_error, 529 overloaded_error, 503, …) or ``Reply.hanging()``. A request
that is not the agent's own turn (no ``tools`` in it: a title or topic request, a quota
probe) gets a short text answer without using the script, and ``POST
/v1/messages/count_tokens`` gets a count; both are still recorded.

What Claude Code 2.1.332 sends in print mode (``claude -p``), seen here: only its own
turns, ``POST /v1/messages?beta=true``, streamed, with its tools, one per model call
(and one per retry of a failed call); no ``count_tokens``, no title or topic request,
with or without ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``. Its retries of a 5xx or 529
do not raise ``x-stainless-retry-count`` (Claude Code retries above the SDK, and prints an
``api_retry`` event for each). The side routes are for litellm and for later releases.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .model_server import ModelServer, Reply, Request, Script, Step

MODEL = "claude-sonnet-4-6"


@dataclass(frozen=True)
class Tokens:
    """A turn's usage as the API reports it: ``input`` is the input not read from a cache."""

    input: int = 100
    output: int = 20
    cache_read: int = 0
    cache_write: int = 0

    def as_usage(self) -> dict[str, int]:
        return {
            "input_tokens": self.input,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": self.output,
        }


@dataclass(frozen=True)
class Block:
    kind: str  # "text" or "tool_use"
    text: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""


def text(words: str) -> Block:
    return Block("text", text=words)


def tool_use(name: str, arguments: dict[str, Any], tool_id: str | None = None) -> Block:
    return Block("tool_use", name=name, input=arguments,
                 id=tool_id or f"toolu_{uuid.uuid4().hex[:24]}")  # fmt: skip


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _message(
    request: Request, content: list[dict[str, Any]], stop: str, usage: Tokens
) -> dict[str, Any]:
    model = request.body.get("model", MODEL) if isinstance(request.body, dict) else MODEL
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage.as_usage(),
    }


def _stream(message: dict[str, Any], blocks: Sequence[Block], usage: Tokens) -> list[bytes]:
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage.as_usage(), "output_tokens": 1}}  # fmt: skip
    chunks = [_sse("message_start", {"type": "message_start", "message": start}),
              _sse("ping", {"type": "ping"})]  # fmt: skip
    for index, block in enumerate(blocks):
        if block.kind == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block.text}
        else:
            opening = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
        chunks += [
            _sse("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": opening}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": delta}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
    chunks += [
        _sse("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                               "usage": {"output_tokens": usage.output}}),
        _sse("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return chunks


def reply(*blocks: Block, usage: Tokens | None = None) -> Step:
    """One model turn: its blocks, streamed or whole as the request asks. Its stop reason
    is ``tool_use`` when it uses a tool, else ``end_turn``."""
    spent = usage or Tokens()

    def answer(request: Request) -> Reply:
        content = [
            {"type": "text", "text": b.text}
            if b.kind == "text"
            else {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
            for b in blocks
        ]
        stop = "tool_use" if any(b.kind == "tool_use" for b in blocks) else "end_turn"
        message = _message(request, content, stop, spent)
        if isinstance(request.body, dict) and request.body.get("stream"):
            return Reply.stream(_stream(message, blocks, spent))
        return Reply.json(message, headers={"request-id": "req_scripted"})

    return answer


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


def error(status: int, message: str | None = None, kind: str | None = None) -> Reply:
    """The API's error reply: ``{"type":"error","error":{"type":…,"message":…}}``."""
    kind = kind or ERROR_TYPES.get(status, "api_error")
    words = message or {
        401: "invalid x-api-key",
        529: "Overloaded",
        503: "Service Unavailable",
    }.get(status, kind)
    return Reply.json(
        {"type": "error", "error": {"type": kind, "message": words}, "request_id": "req_scripted"},
        status,
        headers={
            "request-id": "req_scripted",
            "x-should-retry": "true" if status >= 500 else "false",
        },
    )


def side_request(request: Request) -> bool:
    """Not the agent's own turn: a request without tools (a title, a topic, a probe)."""
    body = request.body if isinstance(request.body, dict) else {}
    return not body.get("tools")


def _side_answer(request: Request) -> Reply:
    return reply(text("Scripted"), usage=Tokens(input=10, output=2))(request)


def _count(request: Request) -> Reply:
    return Reply.json({"input_tokens": max(1, len(request.raw) // 4)})


class AnthropicScript:
    """The answer function: routes as the module says, turns from ``steps`` in order."""

    def __init__(self, steps: Iterable[Step], then: Step | None = None) -> None:
        self.script = Script(steps, then)
        self.turns: list[Request] = []  # the requests the script answered

    def __call__(self, request: Request) -> Reply:
        path = request.path.split("?", 1)[0]
        if request.method == "POST" and path.endswith("/v1/messages/count_tokens"):
            return _count(request)
        if request.method == "POST" and path.endswith("/v1/messages"):
            if side_request(request):
                return _side_answer(request)
            self.turns.append(request)
            return self.script(request)
        if request.method == "HEAD" or path in ("", "/"):
            return Reply.json({})
        return error(404, f"not found: {request.path}", "not_found_error")


def anthropic_server(
    steps: Iterable[Step], then: Step | None = None, **options: Any
) -> tuple[ModelServer, AnthropicScript]:
    """A server (not yet started) answering the Messages API with ``steps``."""
    script = AnthropicScript(steps, then)
    return ModelServer(script, **options), script
