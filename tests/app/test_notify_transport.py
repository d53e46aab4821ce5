"""A hostile webhook endpoint (issue 40): a 302 is not followed (the server it points at
sees nothing); a server dripping a byte every half second is cut off at the send's one
deadline, so a run is held no longer than the guide's worst case; a target that is, or
resolves to, a loopback, link-local or private address is refused before any connection
unless ``allow_private`` names it; a Slack notice arrives with ``<!channel>`` escaped.

Only loopback is ever connected to: the refusals of 10.x and 169.254.169.254 are proved
by a connect that fails the test if it is called."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.app.notify import BACK_OFF_S, TRIES, Notify
from orchestrator.app.notify_transport import Address, Deadline, Refused, post_json
from orchestrator.domain.config import parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.notify import NotifyTarget
from orchestrator.storage import FileStorage
from orchestrator.storage.notify_outbox import NotifyOutbox

from support.notify_fixtures import halt, run_record, webhook_server

pytestmark = pytest.mark.timeout(30)


def target(kind: str = "webhook", **settings: object) -> NotifyTarget:
    return NotifyTarget.model_validate({"kind": kind, "url_env": "HOOK_URL", **settings})


LOOPBACK_ALLOWED = {"allow_private": ["127.0.0.1"]}


def notifier(
    state: Path, hook: NotifyTarget, url: str, said: list[str], sleep: bool = False
) -> tuple[Notify, NotifyOutbox]:
    storage, outbox = FileStorage(state), NotifyOutbox(state)
    notify = Notify(
        targets=(hook,), outbox=outbox, environ={"HOOK_URL": url}, say=said.append,
        lock=storage.locks.ticket, **({} if sleep else {"sleep": lambda _s: None}),
    )  # fmt: skip
    return notify, outbox


def failed(state: Path, **update: object) -> object:
    record = run_record(RunState.FAILED, **{"halt": halt(), **update})
    FileStorage(state).runs.save(record)
    return record


@contextmanager
def redirecting_server(location: str) -> Iterator[tuple[int, list[str]]]:
    """Answers every POST with a 302 to ``location``; yields its port and the paths
    it was posted."""
    posted: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            posted.append(self.path)
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1], posted
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def dripping_server(
    every_s: float = 0.5, answer: bytes = b"HTTP/1.1 200 OK and on and on and on and on\r\n"
) -> Iterator[tuple[int, list[int]]]:
    """Reads a request, then answers one byte of a status line every ``every_s`` (its own
    pace, on its own thread) until the client hangs up or the test ends; yields its port
    and the bytes it managed to send, per connection."""
    stop = threading.Event()
    sent: list[int] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            if answer.startswith(b"HTTP"):  # an HTTP client speaks first, SMTP's listens
                self.request.recv(65536)
            sent.append(0)
            for byte in answer:
                try:
                    self.request.sendall(bytes([byte]))
                except OSError:
                    return
                sent[-1] += 1
                if stop.wait(every_s):
                    return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1], sent
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def listener() -> Iterator[socket.socket]:
    """A loopback port that listens but never accepts: a connection to it would wait in
    its backlog, where ``connected`` finds it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock


def connected(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def no_connection(addresses: Sequence[Address], deadline: Deadline) -> socket.socket:
    raise AssertionError(f"a connection was tried to {addresses}")


# --- redirects --------------------------------------------------------------------------


def test_a_redirect_is_a_failed_send_and_its_target_sees_nothing(tmp_path: Path) -> None:
    with listener() as inside:
        elsewhere = f"http://127.0.0.1:{inside.getsockname()[1]}/latest/meta-data"
        with redirecting_server(elsewhere) as (port, posted):
            said: list[str] = []
            url = f"http://127.0.0.1:{port}/h"
            notify, outbox = notifier(tmp_path, target(**LOOPBACK_ALLOWED), url, said)
            notify.after_run(failed(tmp_path))
        assert not connected(inside)  # not a connection, let alone a request
    assert posted == ["/h"]
    (entry,) = outbox.entries()
    assert (entry.status, entry.tries) == ("failed", 1)  # it would redirect again
    assert entry.error == "$HOOK_URL answered HTTP 302, a redirect: not followed"
    assert said[0].endswith("after 1 try: $HOOK_URL answered HTTP 302, a redirect: not followed")


# --- one deadline per send ----------------------------------------------------------------

# What a loaded machine may add to a deadline before the test sees the clock again (CI
# runs four workers on two cores). The sends these tests hold apart are unbounded: a
# dripping server kept the old code 33 s for one try, a handshake that never ends holds
# it as long as the server waits (10 s and more here). A deadline plus this slack still
# tells them apart, and scheduling delay cannot trip it.
SLACK_S = 3.0


def test_a_dripping_server_is_cut_off_at_the_sends_deadline() -> None:
    with dripping_server() as (port, sent):
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post_json(
                f"http://127.0.0.1:{port}/h", b"{}", target(timeout_s=0.6, **LOOPBACK_ALLOWED)
            )
        took = time.monotonic() - started
    assert 0.55 <= took <= 0.6 + SLACK_S, took
    assert sent and sent[0] >= 1  # it was answering, a byte at a time


@pytest.mark.slow
def test_a_run_is_held_no_longer_than_the_documented_worst_case(tmp_path: Path) -> None:
    """The guide: worst case per target and event ``3 * timeout_s + 1.5 s``. Measured
    with the real back-off sleeps against a server that drips a byte every 0.5 s (before
    issue 40: each byte a fresh timeout, 42 s for a promised 4.5 s)."""
    timeout_s = 0.6
    promised = TRIES * timeout_s + sum(BACK_OFF_S)
    with dripping_server() as (port, sent):
        said: list[str] = []
        hook = target(timeout_s=timeout_s, **LOOPBACK_ALLOWED)
        notify, outbox = notifier(tmp_path, hook, f"http://127.0.0.1:{port}/h", said, sleep=True)
        record = failed(tmp_path)
        started = time.monotonic()
        notify.after_run(record)
        took = time.monotonic() - started
    assert took <= promised + SLACK_S, f"held {took:.2f} s, promised {promised:.2f} s"
    assert took >= TRIES * timeout_s  # it did wait for each try
    (entry,) = outbox.entries()
    assert (entry.status, entry.tries, entry.error) == ("failed", 3, "TimeoutError: timed out")
    assert len(sent) == 3


def test_a_tls_handshake_that_never_ends_is_cut_off_at_the_deadline() -> None:
    with listener() as silent:  # connected to (the backlog), never answering
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post_json(f"https://127.0.0.1:{silent.getsockname()[1]}/h", b"{}",
                      target(timeout_s=0.5, **LOOPBACK_ALLOWED))  # fmt: skip
        took = time.monotonic() - started
    assert 0.45 <= took <= 0.5 + SLACK_S, took


def test_an_smtp_server_dripping_its_greeting_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    with dripping_server(answer=b"220 mail.example ESMTP and on and on and on and on\r\n") as (
        port,
        sent,
    ):
        mail = NotifyTarget.model_validate({
            "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": port, "starttls": False,
            "from": "o@example.org", "to": ["a@example.org"], "timeout_s": 0.6,
            "allow_private": ["127.0.0.1"],
        })  # fmt: skip
        storage, outbox = FileStorage(tmp_path), NotifyOutbox(tmp_path)
        notify = Notify(targets=(mail,), outbox=outbox, environ={}, say=lambda _l: None,
                        lock=storage.locks.ticket, tries=1)  # fmt: skip
        started = time.monotonic()
        notify.after_run(failed(tmp_path))
        took = time.monotonic() - started
    assert took <= 0.6 + SLACK_S, took
    assert sent and sent[0] >= 1  # it was greeting, a byte at a time
    (entry,) = outbox.entries()
    assert (entry.status, entry.error) == ("failed", "TimeoutError: timed out")


def test_a_starttls_handshake_that_never_ends_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    hold = threading.Event()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"220 mail.example ESMTP\r\n")
            while line := self.rfile.readline():
                if line.upper().startswith(b"EHLO"):
                    self.wfile.write(b"250-mail.example\r\n250 STARTTLS\r\n")
                elif line.upper().startswith(b"STARTTLS"):
                    self.wfile.write(b"220 go ahead\r\n")
                    hold.wait(10)  # and never speak TLS
                    return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        mail = NotifyTarget.model_validate({
            "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": server.server_address[1],
            "from": "o@example.org", "to": ["a@example.org"], "timeout_s": 0.6,
            "allow_private": ["127.0.0.1"],
        })  # fmt: skip
        storage, outbox = FileStorage(tmp_path), NotifyOutbox(tmp_path)
        notify = Notify(targets=(mail,), outbox=outbox, environ={}, say=lambda _l: None,
                        lock=storage.locks.ticket, tries=1)  # fmt: skip
        started = time.monotonic()
        notify.after_run(failed(tmp_path))
        took = time.monotonic() - started
    finally:
        hold.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert took <= 0.6 + SLACK_S, took
    (entry,) = outbox.entries()
    # Whichever ends it first says it: the send's deadline, or the TLS layer's own clock
    # set from what is left of it ("_ssl.c:…: The handshake operation timed out").
    assert entry.status == "failed"
    assert entry.error.startswith("TimeoutError: ") and entry.error.endswith("timed out")


# --- addresses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "[::ffff:127.0.0.1]", "localhost"], ids=["v4", "v4-mapped", "name"]
)
def test_loopback_not_allowed_by_name_is_refused_without_a_connection(
    tmp_path: Path, host: str
) -> None:
    with listener() as sock:
        port = sock.getsockname()[1]
        said: list[str] = []
        notify, outbox = notifier(tmp_path, target(), f"http://{host}:{port}/h", said)
        notify.after_run(failed(tmp_path))
        assert not connected(sock)
    (entry,) = outbox.entries()
    assert (entry.status, entry.tries) == ("failed", 1)
    assert entry.error is not None and "not a public address: not sent" in entry.error
    assert "allow_private" in entry.error


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://10.1.2.3:8443/h",
            "http://[fe80::1]/h", "http://[fd00::1]/h", "http://0.0.0.0/h",
            "http://[::ffff:169.254.169.254]/h", "http://192.168.1.1/h", "http://172.16.0.1/h"],
)  # fmt: skip
def test_link_local_and_private_addresses_are_refused_before_any_connection(url: str) -> None:
    with pytest.raises(Refused, match="not a public address: not sent"):
        post_json(url, b"{}", target(), connect_to=no_connection)


def test_a_name_is_resolved_once_checked_and_the_checked_address_is_connected_to() -> None:
    """No DNS rebinding between the check and the connection: the name is resolved once,
    and what is connected to is the address that was checked, never the name again."""
    asked: list[str] = []
    answers = iter([
        [(socket.AF_INET, ("169.254.169.254", 80))],
        [(socket.AF_INET, ("127.0.0.1", 80))],
    ])  # fmt: skip

    def rebinding(host: str, port: int) -> list[Address]:
        asked.append(host)
        return next(answers)

    with pytest.raises(Refused, match=r"hooks\.example is 169\.254\.169\.254"):
        post_json("http://hooks.example/h", b"{}", target(), resolve=rebinding,
                  connect_to=no_connection)  # fmt: skip
    assert asked == ["hooks.example"]

    tried: list[Sequence[Address]] = []

    def record(addresses: Sequence[Address], deadline: Deadline) -> socket.socket:
        tried.append(addresses)
        raise ConnectionRefusedError("not here")

    public = [(socket.AF_INET, ("93.184.216.34", 80))]
    with pytest.raises(ConnectionRefusedError):
        post_json("http://hooks.example/h", b"{}", target(), resolve=lambda h, p: public,
                  connect_to=record)  # fmt: skip
    assert tried == [public]


def test_allowed_by_name_and_port_only(tmp_path: Path) -> None:
    with webhook_server() as hook:
        for allowed, sent in ((["127.0.0.1:1"], False), ([f"127.0.0.1:{hook.port}"], True)):
            state = tmp_path / str(sent)
            notify, outbox = notifier(state, target(allow_private=allowed), hook.url(), [])
            notify.after_run(failed(state))
            (entry,) = outbox.entries()
            assert (entry.status == "sent") is sent, entry
    assert len(hook.requests) == 1


def test_an_smtp_server_on_loopback_is_refused_unless_allowed(tmp_path: Path) -> None:
    with listener() as sock:
        mail = NotifyTarget.model_validate({
            "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": sock.getsockname()[1],
            "from": "o@example.org", "to": ["a@example.org"], "timeout_s": 0.5,
        })  # fmt: skip
        storage, outbox = FileStorage(tmp_path), NotifyOutbox(tmp_path)
        notify = Notify(targets=(mail,), outbox=outbox, environ={}, say=lambda _l: None,
                        lock=storage.locks.ticket)  # fmt: skip
        notify.after_run(failed(tmp_path))
        assert not connected(sock)
    (entry,) = outbox.entries()
    assert (entry.status, entry.tries) == ("failed", 1)
    assert entry.error is not None and "127.0.0.1 is 127.0.0.1, not a public address" in entry.error


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ('"hooks internal"', "notify[0].allow_private[0]: 'hooks internal' is not a host name"),
        ('"hooks.internal:0"', "'hooks.internal:0' has no port from 1 to 65535"),
        ('"[::1"', "'[::1' is not [IPv6]:port"),
        ("8443", "notify[0].allow_private[0]: Input should be a valid string"),
    ],
)
def test_a_bad_allow_private_names_the_key_and_the_file(entry: str, expected: str) -> None:
    text = (
        f'[[notify]]\nkind = "webhook"\nurl_env = "U"\nallow_private = [{entry}]\n'
        '[[stages]]\nname = "a"\ncommand = ["true"]\n'
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, Path("/etc/orch.toml"))
    assert str(info.value).startswith("config error: /etc/orch.toml: ")
    assert expected in str(info.value)


# --- what arrives ---------------------------------------------------------------------------


def test_a_slack_notice_arrives_with_its_control_sequences_escaped(tmp_path: Path) -> None:
    with webhook_server() as hook:
        notify, _ = notifier(tmp_path, target("slack", **LOOPBACK_ALLOWED), hook.url(), [])
        notify.after_run(failed(
            tmp_path, ticket_title="<!channel> deploy now",
            halt=halt("<https://evil.example|Approve now> <@U024BE7LH> & <!here>"),
        ))  # fmt: skip
    (posted,) = hook.requests
    text = posted["text"]
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt; deploy now" in text
    assert "&lt;https://evil.example|Approve now&gt; &lt;@U024BE7LH&gt; &amp; &lt;!here&gt;" in text
    assert posted["unfurl_links"] is False and posted["unfurl_media"] is False
