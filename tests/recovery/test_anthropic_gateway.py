"""The Anthropic gateway, driven through the real SDK with an httpx2.MockTransport: the
request the API would see, and every outcome mapped to a ModelReply (never an exception).
No test reaches the network or sleeps."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from orchestrator.domain.config import ModelConfig
from orchestrator.domain.transcripts import CallError
from orchestrator.recovery import anthropic_gateway
from orchestrator.recovery.anthropic_gateway import AnthropicGateway, gateway_from_config
from orchestrator.recovery.gateway import ModelReply, ModelRequest

from conftest import ROOT, subprocess_env

KEY = "sk-ant-test-SECRET-0123456789"
MODEL = "claude-sonnet-4-6"  # not on the SDK's deprecated list: no warnings
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["retry", "abandon-human"]},
        "reason": {"type": "string"},
    },
    "required": ["action", "reason"],
    "additionalProperties": False,
}
REQUEST = ModelRequest(
    system="You diagnose failed stages.",
    prompt="Stage 'review' failed: ...",
    json_schema=SCHEMA,
    max_tokens=1024,
)
VALID = '{"action": "retry", "reason": "flaky network in the clone stage"}'

Handler = Callable[[httpx2.Request], httpx2.Response]


@pytest.fixture(autouse=True)
def _sdk_env_is_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK reads these from os.environ whatever we pass it; a developer's shell must
    # not change the URL or headers the tests assert on.
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_CUSTOM_HEADERS", raising=False)


def message_json(
    text: str | list[str],
    *,
    stop_reason: str | None = "end_turn",
    input_tokens: int = 812,
    output_tokens: int = 37,
    model: str = "claude-sonnet-4-6-20260101",
) -> dict[str, Any]:
    """A Messages API response body, shaped as the API sends it."""
    texts = [text] if isinstance(text, str) else text
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": t} for t in texts],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        },
    }


def error_json(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class Api:
    """A fake API: answers every request with ``respond`` and keeps what it saw."""

    def __init__(self, respond: Handler) -> None:
        self.respond = respond
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.respond(request)

    def gateway(self, *, max_retries: int = 0, timeout_s: float = 7.5) -> AnthropicGateway:
        return AnthropicGateway(
            model=MODEL,
            api_key=KEY,
            timeout_s=timeout_s,
            max_retries=max_retries,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self)),
        )

    def body(self, index: int = 0) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[index].content)
        return body


def answering(body: dict[str, Any], status: int = 200, **headers: str) -> Api:
    return Api(lambda _request: httpx2.Response(status, json=body, headers=headers))


def ask(api: Api, **options: Any) -> ModelReply:
    return api.gateway(**options).complete(REQUEST)


# --- the request -------------------------------------------------------------------


def test_request_carries_model_limits_prompts_schema_and_key() -> None:
    api = answering(message_json(VALID))
    ask(api)
    [request] = api.requests
    assert request.method == "POST"
    assert request.url.path == "/v1/messages"
    body = api.body()
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1024
    assert body["system"] == REQUEST.system
    assert body["messages"] == [{"role": "user", "content": REQUEST.prompt}]
    # Structured output: the API constrains the reply to this schema, after the SDK's
    # transform (unsupported keywords moved into descriptions; closed objects).
    import anthropic

    sent = body["output_config"]["format"]
    assert sent == {"type": "json_schema", "schema": anthropic.transform_schema(SCHEMA)}
    assert sent["schema"]["properties"]["action"]["enum"] == SCHEMA["properties"]["action"]["enum"]
    assert sent["schema"]["additionalProperties"] is False
    assert "stream" not in body and "tools" not in body
    # anthropic-python 2.14 sends the API key as a bearer token, not as x-api-key.
    assert request.headers["authorization"] == f"Bearer {KEY}"
    # Our timeout, not one the SDK derives from max_tokens.
    assert request.headers["x-stainless-timeout"] == "7.5"


# --- replies that finished: text verbatim (validation is not the gateway's job) -----


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(VALID, id="valid-json"),
        pytest.param(f"Here is my verdict:\n{VALID}\nHope that helps.", id="prose-around-json"),
        pytest.param(f"```json\n{VALID}\n```", id="fenced-json"),
        pytest.param('{"action": "rewrite-everything", "reason": "why not"}', id="unknown-action"),
        pytest.param('{"action": "retry"}', id="missing-field"),
    ],
)
def test_finished_reply_returns_text_verbatim_with_usage(text: str) -> None:
    reply = ask(answering(message_json(text)))
    assert reply == ModelReply(
        text=text,
        model="claude-sonnet-4-6-20260101",
        stop_reason="end_turn",
        input_tokens=812,
        output_tokens=37,
        error=None,
    )


def test_text_blocks_are_concatenated() -> None:
    reply = ask(answering(message_json(['{"action": ', '"retry", "reason": "x"}'])))
    assert reply.text == '{"action": "retry", "reason": "x"}'


# --- replies that did not finish: no text, usage kept --------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "error", "kind"),
    [
        ("refusal", "model refused", CallError.REFUSED),
        ("max_tokens", "model stopped at max_tokens", CallError.MAX_TOKENS),
        ("pause_turn", "unexpected stop_reason pause_turn", CallError.STOPPED),
        ("tool_use", "unexpected stop_reason tool_use", CallError.STOPPED),
    ],
)
def test_unfinished_reply_is_an_error_with_usage(
    stop_reason: str, error: str, kind: CallError
) -> None:
    reply = ask(answering(message_json('{"action": "re', stop_reason=stop_reason)))
    assert reply == ModelReply(
        text=None,
        model="claude-sonnet-4-6-20260101",
        stop_reason=stop_reason,
        input_tokens=812,
        output_tokens=37,
        error=error,
        error_kind=kind,
    )


# --- API and network failures: translated, never raised, never echoing the key --------


def test_rate_limit_is_retried_then_reported() -> None:
    # retry-after-ms, not retry-after: 0, which the SDK treats as "unspecified" and
    # answers with its own ~0.5 s backoff; 1 ms keeps the retry from sleeping.
    api = answering(
        error_json("rate_limit_error", "Number of requests has exceeded your rate limit"),
        429,
        **{"retry-after-ms": "1"},
    )
    reply = ask(api, max_retries=1)
    assert reply == ModelReply(
        text=None, model=MODEL, error="rate limited (429)", error_kind=CallError.RATE_LIMITED
    )
    assert len(api.requests) == 2
    assert api.requests[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(
    ("status", "kind", "error", "error_kind"),
    [
        (500, "api_error", "server error (5xx: 500)", CallError.SERVER),
        (529, "overloaded_error", "server error (5xx: 529)", CallError.SERVER),
        (502, "api_error", "server error (5xx: 502)", CallError.SERVER),
        (400, "invalid_request_error", "API error: BadRequestError 400", CallError.API),
        (404, "not_found_error", "API error: NotFoundError 404", CallError.API),
        (403, "permission_error", "permission denied (403)", CallError.AUTHENTICATION),
    ],
)
def test_status_errors_are_translated(
    status: int, kind: str, error: str, error_kind: CallError
) -> None:
    api = answering(error_json(kind, "something went wrong"), status)
    reply = ask(api)
    assert reply == ModelReply(text=None, model=MODEL, error=error, error_kind=error_kind)
    assert len(api.requests) == 1  # max_retries=0


def test_authentication_failure_never_shows_the_key() -> None:
    # A server (or proxy) that echoes the credential back must not get it into our text.
    api = answering(error_json("authentication_error", f"invalid x-api-key: {KEY}"), 401)
    reply = ask(api, max_retries=2)
    assert reply.error == "authentication failed (401)"
    assert reply.error_kind is CallError.AUTHENTICATION
    assert reply.text is None
    assert len(api.requests) == 1  # a 401 is not retried
    assert KEY not in repr(reply)
    assert KEY not in repr(api.gateway())


def test_timeout_is_reported_with_the_configured_seconds() -> None:
    def hang(request: httpx2.Request) -> httpx2.Response:
        # What httpx2 raises when the read deadline passes; the SDK maps
        # httpx2.TimeoutException to APITimeoutError.
        raise httpx2.ReadTimeout("timed out", request=request)

    api = Api(hang)
    reply = ask(api, timeout_s=7.5)
    assert reply == ModelReply(
        text=None,
        model=MODEL,
        error="model call timed out after 7.5s",
        error_kind=CallError.TIMEOUT,
    )
    assert len(api.requests) == 1


def test_connection_failure_is_reported() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    reply = ask(Api(refuse))
    assert reply == ModelReply(
        text=None, model=MODEL, error="connection failed", error_kind=CallError.CONNECTION
    )


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(
            httpx2.Response(200, text="not json", headers={"content-type": "application/json"}),
            id="undecodable-json",
        ),
        pytest.param(httpx2.Response(200, json={"hello": 1}), id="not-a-message"),
        pytest.param(httpx2.Response(200, json=[]), id="a-list"),
        pytest.param(
            httpx2.Response(200, text="<html>", headers={"content-type": "text/html"}),
            id="html",
        ),
    ],
)
def test_malformed_success_body_is_an_error_not_an_exception(response: httpx2.Response) -> None:
    reply = ask(Api(lambda _request: response))
    assert reply == ModelReply(
        text=None,
        model=MODEL,
        error="API error: malformed response",
        error_kind=CallError.MALFORMED,
    )


def test_errors_never_contain_the_key() -> None:
    for status in (400, 401, 403, 429, 500):
        api = answering(error_json("error", f"echo {KEY}"), status, **{"x-should-retry": "false"})
        reply = ask(api)
        assert reply.error is not None and KEY not in reply.error


# --- construction ---------------------------------------------------------------------


def test_gateway_from_config_without_key_is_none() -> None:
    config = ModelConfig()
    assert gateway_from_config(config, {}) is None
    assert gateway_from_config(config, {"ANTHROPIC_API_KEY": ""}) is None
    assert gateway_from_config(config, {"OTHER_KEY": KEY}) is None


def test_gateway_from_config_uses_the_configured_model_key_and_timeout() -> None:
    config = ModelConfig(name="claude-haiku-4-5", api_key_env="RECOVERY_KEY", timeout_s=30.0)
    api = answering(message_json(VALID))
    gateway = gateway_from_config(
        config,
        {"RECOVERY_KEY": KEY},
        http_client=httpx2.Client(transport=httpx2.MockTransport(api)),
    )
    assert gateway is not None and gateway.model_name == "claude-haiku-4-5"
    assert gateway.complete(REQUEST).text == VALID
    assert api.body()["model"] == "claude-haiku-4-5"
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert api.requests[0].headers["x-stainless-timeout"] == "30.0"


def test_real_client_refused_while_model_requests_are_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(anthropic_gateway, "ALLOW_MODEL_REQUESTS", False)
    with pytest.raises(RuntimeError, match=r"^model requests are disabled \(tests\)$"):
        AnthropicGateway(model=MODEL, api_key=KEY, timeout_s=5.0, max_retries=0)
    with pytest.raises(RuntimeError, match="model requests are disabled"):
        gateway_from_config(ModelConfig(), {"ANTHROPIC_API_KEY": KEY})


def test_real_client_refused_when_the_environment_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(anthropic_gateway, "ALLOW_MODEL_REQUESTS", True)
    monkeypatch.setenv("ORCHESTRATOR_ALLOW_MODEL_REQUESTS", "0")
    with pytest.raises(RuntimeError, match=r"^model requests are disabled \(tests\)$"):
        AnthropicGateway(model=MODEL, api_key=KEY, timeout_s=5.0, max_retries=0)


def test_injected_client_is_allowed_while_model_requests_are_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(anthropic_gateway, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.setenv("ORCHESTRATOR_ALLOW_MODEL_REQUESTS", "0")
    assert ask(answering(message_json(VALID))).text == VALID


def test_importing_the_gateway_does_not_import_the_sdk() -> None:
    code = (
        "import sys\n"
        "import orchestrator.recovery.anthropic_gateway\n"
        "loaded = sorted(m for m in ('anthropic', 'httpx2') if m in sys.modules)\n"
        "print(','.join(loaded) or 'none')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "none"


def test_the_verdict_schema_travels_once_in_the_structured_output_format() -> None:
    """A diagnosis request as the API receives it: the schema in ``output_config``, and
    the message text naming the vocabulary compactly, without the schema."""
    import anthropic

    from orchestrator.domain.proposals import PromptFacts
    from orchestrator.domain.verdicts import verdict_json_schema
    from orchestrator.recovery.prompt import SYSTEM, build_prompt

    facts = PromptFacts(
        ticket_id="T-1", ticket_kind="bug-fix", failing_stage="review",
        failing_check="project-tests", current_engine="coder", current_model="small",
        engines={"coder": ["small", "large"]}, recipe_allowlist=["git"],
    )  # fmt: skip
    schema = verdict_json_schema()
    request = ModelRequest(SYSTEM, build_prompt(facts, "<bundle>"), schema, 1024)
    api = answering(message_json('{"action": "retry", "summary": "flaky"}'))
    api.gateway().complete(request)
    body = api.body()
    sent = body["output_config"]["format"]
    assert sent == {"type": "json_schema", "schema": anthropic.transform_schema(schema)}
    [message] = body["messages"]
    text = message["content"]
    assert "- mechanical-fix {summary, repair_plan{verification_check, commands[]}}: " in text
    raw = api.requests[0].content.decode()
    # The union's models are named in the request only where the schema names them.
    in_schema = json.dumps(sent)
    for name in ("RepairPlan", "SubTicket", "MechanicalFixVerdict"):
        assert raw.count(f'"{name}"') == in_schema.count(f'"{name}"') > 0, name
        assert name not in text
    # The v1 prompt carried it a second time, in the text.
    v1 = build_prompt(facts, "<bundle>", version="recovery-v1")
    assert '"RepairPlan"' in v1 and len(v1) - len(text) > 3000


# --- is the key accepted? ----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "refusal"),
    [
        (401, error_json("authentication_error", f"invalid x-api-key: {KEY}"),
         "authentication failed (401)"),
        (403, error_json("permission_error", "no access"), "permission denied (403)"),
        (200, {"data": [], "has_more": False, "first_id": None, "last_id": None}, None),
        # Not an answer about the key: the diagnosis call meets it, with its retries.
        (500, error_json("api_error", "down"), None),
        (529, error_json("overloaded_error", "busy"), None),
    ],
)  # fmt: skip
def test_the_key_is_asked_about_once_without_tokens_or_retries(
    status: int, body: dict[str, Any], refusal: str | None
) -> None:
    api = answering(body, status)
    assert api.gateway(max_retries=2).key_refusal() == refusal
    [request] = api.requests  # one request, never retried
    assert (request.method, request.url.path) == ("GET", "/v1/models")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert refusal is None or KEY not in refusal


def test_a_key_question_that_cannot_be_answered_is_not_a_refusal() -> None:
    def down(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    assert Api(down).gateway().key_refusal() is None
