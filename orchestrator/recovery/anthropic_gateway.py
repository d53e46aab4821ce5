"""The Anthropic Messages API behind the ``ModelGateway`` protocol.

This is the only module that imports ``anthropic`` (and ``httpx2``), and it does so
inside functions: importing the SDK costs ~1.8 s, which every CLI run that never asks
a model would otherwise pay. The SDK's exceptions are translated here into a
``ModelReply`` with ``error`` set, so nothing outside this file ever sees them.

Structured output: ``messages.create(output_config={"format": {"type": "json_schema",
"schema": ...}})`` is generally available in anthropic-python 2.x (no beta header); the
API then constrains the reply to the schema. The reply is still only text to us: the
verdict module validates it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from orchestrator.domain.config import ModelConfig
from orchestrator.domain.transcripts import CallError
from orchestrator.recovery.gateway import ModelReply, ModelRequest

if TYPE_CHECKING:
    # For the type checker only: at run time the SDK is imported lazily (see above).
    import anthropic
    from anthropic.types import Message

# Tests set this to False (and ORCHESTRATOR_ALLOW_MODEL_REQUESTS=0), so that nothing a
# test starts can reach the real API; a gateway given its own http_client (a
# MockTransport in tests) is always allowed, since that client decides where requests go.
ALLOW_MODEL_REQUESTS: bool = True
ALLOW_ENV = "ORCHESTRATOR_ALLOW_MODEL_REQUESTS"


class AnthropicGateway:
    """One ``messages.create`` call per ``complete``; never raises for what the model or
    the network did."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        timeout_s: float,
        max_retries: int,
        http_client: object | None = None,
    ) -> None:
        if http_client is None and (not ALLOW_MODEL_REQUESTS or os.environ.get(ALLOW_ENV) == "0"):
            raise RuntimeError("model requests are disabled (tests)")
        if not api_key:
            raise ValueError("AnthropicGateway needs a non-empty api_key")

        import anthropic
        import httpx2

        if http_client is not None and not isinstance(http_client, httpx2.Client):
            raise TypeError(
                f"http_client must be an httpx2.Client, not {type(http_client).__name__}"
            )
        self.model_name = model
        self._timeout_s = timeout_s
        # The key lives only inside the SDK client: not on self, so no repr or log of the
        # gateway can show it.
        self._client: anthropic.Anthropic = anthropic.Anthropic(
            api_key=api_key,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=http_client,
        )

    def __repr__(self) -> str:
        return f"AnthropicGateway(model={self.model_name!r})"

    def key_refusal(self) -> str | None:
        """Why the API refuses this key, from one request that costs no tokens (the
        models list), or None: accepted, or the question could not be answered (a
        network error is the diagnosis call's to meet, with its retries)."""
        import anthropic

        try:
            self._client.with_options(
                max_retries=0, timeout=min(self._timeout_s, 10.0)
            ).models.list(limit=1)
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            return self._describe(exc)[1]
        except (anthropic.AnthropicError, json.JSONDecodeError):
            return None
        return None

    def complete(self, request: ModelRequest) -> ModelReply:
        import anthropic

        try:
            message = self._client.messages.create(
                model=self.model_name,
                max_tokens=request.max_tokens,
                system=request.system,
                messages=[{"role": "user", "content": request.prompt}],
                # transform_schema moves keywords the API does not accept (maxLength,
                # pattern...) into descriptions; we validate them ourselves afterwards.
                output_config={
                    "format": {
                        "type": "json_schema",
                        "schema": anthropic.transform_schema(dict(request.json_schema)),
                    }
                },
                # Explicit, so the SDK does not derive a non-streaming timeout from
                # max_tokens (and refuse large ones) instead of using ours.
                timeout=self._timeout_s,
            )
        except anthropic.AnthropicError as exc:
            kind, why = self._describe(exc)
            return ModelReply(text=None, model=self.model_name, error=why, error_kind=kind)
        except json.JSONDecodeError:
            # The SDK parses a 2xx body without wrapping its decode error.
            return ModelReply(
                text=None, model=self.model_name, error=_MALFORMED, error_kind=CallError.MALFORMED
            )
        return _reply_from_message(message, self.model_name)

    def _describe(self, exc: anthropic.AnthropicError) -> tuple[CallError, str]:
        """A short, key-free description. Never ``str(exc)``: the SDK's messages may
        carry the response body or request details."""
        import anthropic

        # Order matters: APITimeoutError is an APIConnectionError, and the status
        # errors are all APIStatusError.
        if isinstance(exc, anthropic.APITimeoutError):
            return CallError.TIMEOUT, f"model call timed out after {self._timeout_s:g}s"
        if isinstance(exc, anthropic.APIConnectionError):
            return CallError.CONNECTION, "connection failed"
        if isinstance(exc, anthropic.RateLimitError):
            return CallError.RATE_LIMITED, "rate limited (429)"
        if isinstance(exc, anthropic.AuthenticationError):
            return CallError.AUTHENTICATION, "authentication failed (401)"
        if isinstance(exc, anthropic.PermissionDeniedError):
            # The key is known but may not use this API or model: a person fixes it.
            return CallError.AUTHENTICATION, "permission denied (403)"
        if isinstance(exc, anthropic.InternalServerError) or (
            isinstance(exc, anthropic.APIStatusError) and exc.status_code >= 500
        ):
            return CallError.SERVER, f"server error (5xx: {exc.status_code})"
        status = getattr(exc, "status_code", None)
        why = f"API error: {type(exc).__name__}" + (f" {status}" if status is not None else "")
        return CallError.API, why


_MALFORMED = "API error: malformed response"


def _reply_from_message(message: Message, requested_model: str) -> ModelReply:
    """Only ``end_turn`` yields text: any other stop means the answer is cut short or
    absent, and the usage is kept either way because it was paid for."""
    # The SDK builds the Message without validating it, so a body of the wrong shape
    # leaves fields missing or None: read them defensively rather than raise.
    if getattr(message, "type", None) != "message":
        return ModelReply(
            text=None, model=requested_model, error=_MALFORMED, error_kind=CallError.MALFORMED
        )
    usage = getattr(message, "usage", None)
    model = getattr(message, "model", None)
    stop_reason = getattr(message, "stop_reason", None)
    text: str | None = None
    error: str | None = None
    kind: CallError | None = None
    if stop_reason == "end_turn":
        text = "".join(
            block.text
            for block in getattr(message, "content", None) or ()
            if getattr(block, "type", None) == "text" and isinstance(block.text, str)
        )
    elif stop_reason == "max_tokens":
        error, kind = "model stopped at max_tokens", CallError.MAX_TOKENS
    elif stop_reason == "refusal":
        error, kind = "model refused", CallError.REFUSED
    else:
        error, kind = f"unexpected stop_reason {stop_reason}", CallError.STOPPED
    return ModelReply(
        text=text,
        model=model if isinstance(model, str) else requested_model,
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
        input_tokens=_tokens(usage, "input_tokens"),
        output_tokens=_tokens(usage, "output_tokens"),
        error=error,
        error_kind=kind,
    )


def _tokens(usage: object, name: str) -> int:
    count = getattr(usage, name, None)
    return count if isinstance(count, int) else 0


def gateway_from_config(
    model: ModelConfig,
    environ: Mapping[str, str],
    *,
    http_client: object | None = None,
) -> AnthropicGateway | None:
    """The configured gateway, or None when the key variable is unset or empty (whether
    that is an error is the caller's decision)."""
    api_key = environ.get(model.api_key_env, "")
    if not api_key:
        return None
    return AnthropicGateway(
        model=model.name,
        api_key=api_key,
        timeout_s=model.timeout_s,
        max_retries=model.max_retries,
        http_client=http_client,
    )
