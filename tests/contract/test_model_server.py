"""The scripted model server the contract tests stand on: it answers in script order,
records what it was sent, streams, hangs until stopped, and is bounded."""

from __future__ import annotations

import http.client
import json

import pytest

from .anthropic_api import AnthropicScript, error, reply, text
from .model_server import ModelServer, Reply, Script

pytestmark = pytest.mark.slow  # the tier's own; these take milliseconds


def post(server: ModelServer, path: str, body: object, timeout: float = 10) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("POST", path, json.dumps(body), {"content-type": "application/json",
                                                            "x-api-key": "k"})  # fmt: skip
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_replies_in_order_then_the_fallback_and_every_request_recorded() -> None:
    script = Script([Reply.json({"n": 1}), lambda r: Reply.json({"saw": r.body})])
    with ModelServer(script) as server:
        assert post(server, "/a", {"q": 1}) == (200, b'{"n": 1}')
        assert post(server, "/b", {"q": 2}) == (200, b'{"saw": {"q": 2}}')
        status, body = post(server, "/c", {})
        assert (status, json.loads(body)) == (
            500, {"error": "the scripted model server's script is over"}
        )  # fmt: skip
    assert server.paths() == ["/a", "/b", "/c"]
    assert server.requests[0].headers["x-api-key"] == "k" and server.requests[0].body == {"q": 1}
    assert script.left == 0


def test_a_stream_arrives_whole_and_a_hang_ends_when_the_server_stops() -> None:
    server = ModelServer(Script([Reply.stream([b"data: 1\n\n", b"data: 2\n\n"]), Reply.hanging()]))
    with server:
        assert post(server, "/s", {}) == (200, b"data: 1\n\ndata: 2\n\n")
        with pytest.raises(TimeoutError):
            post(server, "/h", {}, timeout=0.5)
    # Stopped: the hanging handler has returned, the port is closed.
    with pytest.raises(ConnectionRefusedError):
        post(server, "/after", {})


def test_it_is_bounded_in_requests_and_in_time() -> None:
    with ModelServer(lambda r: Reply.json({}), max_requests=2) as server:
        assert [post(server, "/", {})[0] for _ in range(3)] == [200, 200, 500]
        assert len(server.requests) == 2
    short = ModelServer(lambda r: Reply.json({}), lifetime_s=0.1).start()
    assert short._stopped.wait(10)  # it stopped by itself


def test_the_messages_dialect_routes_side_requests_apart_from_the_script() -> None:
    script = AnthropicScript([error(529), reply(text("hi")), reply(text("streamed"))])
    with ModelServer(script) as server:
        turn = {"model": "m", "tools": [{"name": "Read"}], "messages": []}
        assert post(server, "/v1/messages", turn)[0] == 529
        status, body = post(server, "/v1/messages", {"model": "m", "messages": []})  # no tools
        assert status == 200 and json.loads(body)["content"] == [
            {"type": "text", "text": "Scripted"}
        ]
        assert json.loads(post(server, "/v1/messages/count_tokens", turn)[1])["input_tokens"] > 0
        status, body = post(server, "/v1/messages", turn)
        message = json.loads(body)
        assert (status, message["content"], message["stop_reason"]) == (
            200, [{"type": "text", "text": "hi"}], "end_turn"
        )  # fmt: skip
        assert message["usage"]["cache_read_input_tokens"] == 0
        streamed = post(server, "/v1/messages", {**turn, "stream": True})[1].decode()
    events = [line[7:] for line in streamed.splitlines() if line.startswith("event: ")]
    assert events == [
        "message_start", "ping", "content_block_start", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    assert '"text_delta", "text": "streamed"' in streamed
    assert len(script.turns) == 3 and len(server.requests) == 5
