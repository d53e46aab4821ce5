"""A scripted model server on loopback: the core the API dialects (``anthropic_api.py``,
``openai_api.py``) build on. A threaded HTTP server on 127.0.0.1 at an ephemeral port;
each request is recorded (method, path, headers, JSON body) and answered by a function of
it, usually a ``Script`` of replies given in order.

    script = Script([Reply.json({"ok": True}), Reply.hang()])
    with ModelServer(script) as server:
        ...  # point the engine at server.url; its egress allow-list names server.host_port
    server.requests[0].path, server.requests[0].body

A ``Reply`` is a status, headers and a body sent whole, or ``chunks`` sent one by one and
flushed (a stream: the connection closes after the last), or a hang: no answer until the
server stops. The server is bounded: at most ``max_requests`` are recorded and answered
(the rest get a 500 saying so), and it stops by itself after ``lifetime_s`` even if a test
forgets to, so a hung engine or a leaked server never outlives its test for long.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MAX_REQUESTS = 200
DEFAULT_LIFETIME_S = 300.0
_MAX_BODY = 8 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    """One request as the server received it. ``body`` is the parsed JSON (None when the
    body was empty or not JSON); header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


@dataclass(frozen=True)
class Reply:
    """What to answer. ``chunks``, when given, are streamed (each flushed) in place of
    ``body``; ``hang`` answers nothing until the server stops."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: Sequence[bytes] | None = None
    hang: bool = False

    @classmethod
    def json(cls, obj: object, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(
            status,
            {"content-type": "application/json", **(headers or {})},
            json.dumps(obj).encode(),
        )

    @classmethod
    def stream(cls, chunks: Iterable[bytes], content_type: str = "text/event-stream") -> Reply:
        return cls(200, {"content-type": content_type, "cache-control": "no-cache"}, b"",
                   tuple(chunks))  # fmt: skip

    @classmethod
    def hanging(cls) -> Reply:
        return cls(hang=True)


Answer = Callable[[Request], Reply]
Step = Reply | Answer


class Script:
    """Replies given in order, one per call; a step may be a function of the request.
    Once they are used up, ``then`` answers (by default a 500 saying the script is over,
    which a test sees in the engine's output)."""

    def __init__(self, steps: Iterable[Step], then: Step | None = None) -> None:
        self._steps = list(steps)
        self._then = then
        self._lock = threading.Lock()
        self.used = 0

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            if self.used < len(self._steps):
                step: Step | None = self._steps[self.used]
                self.used += 1
            else:
                step = self._then
        if step is None:
            return Reply.json({"error": "the scripted model server's script is over"}, 500)
        return step if isinstance(step, Reply) else step(request)

    @property
    def left(self) -> int:
        return len(self._steps) - self.used


class ModelServer:
    """The server: ``url`` (``http://127.0.0.1:PORT``), ``host_port`` (for an egress
    allow-list), ``requests`` (what it received, in order)."""

    def __init__(
        self,
        answer: Answer,
        *,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        lifetime_s: float = DEFAULT_LIFETIME_S,
    ) -> None:
        self.answer = answer
        self.max_requests = max_requests
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.host_port = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host_port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def start(self) -> ModelServer:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()  # hanging replies end now
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def _record(self, request: Request) -> bool:
        with self._lock:
            if len(self.requests) >= self.max_requests:
                return False
            self.requests.append(request)
            return True


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads ``requests``

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(min(length, _MAX_BODY)) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = Request(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                raw,
            )
            if not server._record(request):
                reply = Reply.json({"error": "too many requests to the scripted server"}, 500)
            else:
                try:
                    reply = server.answer(request)
                except Exception as exc:  # noqa: BLE001 — a broken script answers, never hangs
                    reply = Reply.json({"error": f"script failed: {exc!r}"}, 500)
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            if reply.hang:
                server._stopped.wait()
                self.close_connection = True
                return
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.chunks is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            else:
                # A stream ends when the connection does.
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

    return Handler
