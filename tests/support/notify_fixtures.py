"""For the notification tests: run records in each state, and loopback servers — a
webhook that answers as scripted (a status, or hanging past the client's timeout) and
records what it was posted, a port nobody listens on, and an SMTP server speaking just
enough of the protocol for smtplib."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Halt, RunRecord, StageRecord, VerdictRef

HANG = -1  # a scripted answer: hold the connection until the test ends
AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


def run_record(state: RunState = RunState.RUNNING, **update: object) -> RunRecord:
    record = RunRecord(
        run_id="T-1-20261201T030405Z-abcd", ticket_id="T-1", ticket_title="Fix the thing",
        ticket_kind="bug", ticket_path="/t/T-1.md", ticket_snapshot="/s/T-1.md",
        ticket_sha256="0" * 64, repository="/r.git", base_branch="main",
        work_branch="orchestrator/T-1", config_path="/c.toml", config_sha256="0" * 64,
        run_dir="/s/runs/x", clone_dir="/s/runs/x/clone", created_at=AT, updated_at=AT,
        stages=(StageRecord(name="a"),),
    )  # fmt: skip
    return record.model_copy(update={"state": state, **update})


def halt(detail: str = "check 'tests' exited 1") -> Halt:
    return Halt(reason=HaltReason.CHECK_FAILED, stage="a", detail=detail)


def verdict(number: int, outcome: str | None = None) -> VerdictRef:
    return VerdictRef(
        number=number, attempt=1, source="model", action="retry",
        path=f"/s/runs/x.verdict-{number}.json", outcome=outcome,
    )  # fmt: skip


class Webhook:
    """What the server was posted, and what it answers next (``script``; then 200)."""

    def __init__(self, port: int, script: list[int]) -> None:
        self.port = port
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.release = threading.Event()
        self._lock = threading.Lock()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def next_answer(self) -> int:
        with self._lock:
            return self.script.pop(0) if self.script else 200


@contextmanager
def webhook_server(*script: int) -> Iterator[Webhook]:
    hook: Webhook

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            answer = hook.next_answer()
            hook.requests.append(json.loads(body))
            hook.paths.append(self.path)
            if answer == HANG:
                hook.release.wait(10)  # released at teardown, long after the client gave up
                return
            self.send_response(answer)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    hook = Webhook(server.server_address[1], list(script))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield hook
    finally:
        hook.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Mailbox:
    def __init__(self, port: int) -> None:
        self.port = port
        self.messages: list[dict[str, Any]] = []


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """Enough SMTP for ``smtplib.SMTP.send_message`` without STARTTLS or AUTH."""
    box: Mailbox

    class Handler(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write(f"{line}\r\n".encode())
            self.wfile.flush()

        def handle(self) -> None:
            self.reply("220 localhost fake")
            envelope: dict[str, Any] = {"to": []}
            while line := self.rfile.readline():
                verb = line.decode().strip().split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    self.reply("250 localhost")
                elif verb == "MAIL":
                    envelope["from"] = line.decode().strip()
                    self.reply("250 OK")
                elif verb == "RCPT":
                    envelope["to"].append(line.decode().strip())
                    self.reply("250 OK")
                elif verb == "DATA":
                    self.reply("354 go on")
                    data = []
                    while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                        data.append(chunk.decode())
                    envelope["data"] = "".join(data)
                    box.messages.append(envelope)
                    envelope = {"to": []}
                    self.reply("250 queued")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:
                    self.reply("502 not here")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box = Mailbox(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield box
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
