"""The OpenAI Responses API, as Codex 0.171 calls it, on the scripted model server
(``model_server.py``).

    server, script = openai_server([
        respond(apply_patch("*** Begin Patch\\n*** Update File: x.py\\n…"), usage=...),
        respond(message("Done.")),
    ])
    with server: ...  # Codex's provider: base_url = server.url + "/v1"

``POST /v1/responses`` takes the next step of the script: a model response (``respond``:
output items — an assistant ``message``, a ``function_call`` such as ``exec_command``, a
``custom_tool_call`` such as ``apply_patch``, ``reasoning`` — streamed as Server-Sent
Events the way Codex reads them: ``response.created``, ``response.output_item.added`` and
``response.output_item.done`` per item, ``response.completed`` with the usage) or an error
(``error``: 401 ``invalid_api_key``, 503 or 529 overloaded, 429, …) or
``Reply.hanging()``. Anything else (Codex asking for its model list, say) gets a 404,
recorded, without using the script.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .model_server import ModelServer, Reply, Request, Script, Step

# A model Codex 0.171 knows (``codex debug models``): it offers ``apply_patch`` as a
# freeform tool for it; for a model it does not know it warns and offers no apply_patch.
MODEL = "gpt-5.5"


@dataclass(frozen=True)
class Tokens:
    """A response's usage as the API reports it: ``input`` counts the cached part too
    (OpenAI's ``input_tokens``), ``cached`` is that part."""

    input: int = 100
    output: int = 20
    cached: int = 0
    reasoning: int = 0

    def as_usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.input + self.output,
        }


Item = dict[str, Any]


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def message(text: str) -> Item:
    """The assistant's words: the answer that ends Codex's turn."""
    return {
        "type": "message", "id": _id("msg"), "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }  # fmt: skip


def reasoning(summary: str) -> Item:
    return {
        "type": "reasoning", "id": _id("rs"),
        "summary": [{"type": "summary_text", "text": summary}],
    }  # fmt: skip


def apply_patch(patch: str) -> Item:
    """Codex's ``apply_patch`` (a freeform tool: the patch is the input as written)."""
    return {
        "type": "custom_tool_call", "id": _id("ctc"), "call_id": _id("call"),
        "name": "apply_patch", "input": patch, "status": "completed",
    }  # fmt: skip


def exec_command(cmd: str) -> Item:
    """Codex's ``exec_command`` (a function tool: its arguments are a JSON string)."""
    return {
        "type": "function_call", "id": _id("fc"), "call_id": _id("call"),
        "name": "exec_command", "arguments": json.dumps({"cmd": cmd}), "status": "completed",
    }  # fmt: skip


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _response(request: Request, output: list[Item], usage: Tokens | None) -> dict[str, Any]:
    model = request.body.get("model", MODEL) if isinstance(request.body, dict) else MODEL
    return {
        "id": _id("resp"), "object": "response", "model": model, "status": "completed",
        "output": output, "usage": usage.as_usage() if usage else None,
    }  # fmt: skip


def respond(*items: Item, usage: Tokens | None = None) -> Step:
    """One model response: its items, then ``response.completed`` with ``usage``."""
    spent = usage or Tokens()

    def answer(request: Request) -> Reply:
        done = _response(request, list(items), spent)
        created = {**done, "status": "in_progress", "output": [], "usage": None}
        chunks = [_sse({"type": "response.created", "sequence_number": 0, "response": created})]
        for index, item in enumerate(items):
            for kind in ("response.output_item.added", "response.output_item.done"):
                chunks.append(_sse({"type": kind, "output_index": index, "item": item}))
        chunks.append(_sse({"type": "response.completed", "response": done}))
        return Reply.stream(chunks)

    return answer


ERRORS = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: (
        "invalid_request_error", "invalid_api_key",
        "Incorrect API key provided: sk-cont*********************. You can find your API key "
        "at https://platform.openai.com/account/api-keys.",
    ),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
    529: ("server_error", None, "The server is overloaded or not ready yet."),
}  # fmt: skip


def error(status: int, words: str | None = None) -> Reply:
    """The API's error reply: ``{"error":{"message","type","param","code"}}``."""
    kind, code, said = ERRORS.get(status, ("server_error", None, "error"))
    return Reply.json(
        {"error": {"message": words or said, "type": kind, "param": None, "code": code}},
        status,
        headers={"x-request-id": "req_scripted"},
    )


class OpenAIScript:
    """The answer function: ``POST …/responses`` gets the next step, in order."""

    def __init__(self, steps: Iterable[Step], then: Step | None = None) -> None:
        self.script = Script(steps, then)
        self.turns: list[Request] = []  # the requests the script answered

    def __call__(self, request: Request) -> Reply:
        path = request.path.split("?", 1)[0]
        if request.method == "POST" and path.endswith("/responses"):
            self.turns.append(request)
            return self.script(request)
        return error(404, f"not found: {request.path}")


def openai_server(
    steps: Iterable[Step], then: Step | None = None, **options: Any
) -> tuple[ModelServer, OpenAIScript]:
    """A server (not yet started) answering the Responses API with ``steps``."""
    script = OpenAIScript(steps, then)
    return ModelServer(script, **options), script
