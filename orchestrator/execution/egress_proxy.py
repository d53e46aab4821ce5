"""The egress proxy: the only way a sandboxed process reaches a host, run here, outside
the sandbox, in a thread per sandboxed run (issue 40, item 4).

The sandbox has a network namespace with no route out. Its bridge (``sandbox.BRIDGE``)
accepts connections on the namespace's loopback and sends each socket's descriptor over a
``socketpair`` whose other end is ours. For every descriptor received we read an HTTP
proxy request — ``CONNECT host:port`` (what HTTPS clients send), or a plain-HTTP request
with an absolute URI (``GET http://host/path``) — check ``host:port`` against the stage's
``EgressPolicy``, and either connect (the name resolved here, outside) and relay bytes
both ways, or answer ``403`` and record the denial. A request that is not one of those,
or a descriptor that is not a connected stream socket, is refused and recorded too:
nothing the sandbox sends over the channel can make us connect anywhere the policy does
not name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.domain.egress import EgressPolicy, split_host_port

# The descriptor number of the channel inside the sandbox, and the loopback port there.
BRIDGE_FD = 101
BRIDGE_PORT = 3128
_PROXY_URL = f"http://127.0.0.1:{BRIDGE_PORT}"
# What a sandboxed process with egress is told (both spellings: tools read either one).
# NO_PROXY is empty: nothing goes around the proxy (and nothing could).
PROXY_ENV: dict[str, str] = {
    name: value
    for key, value in (
        ("HTTPS_PROXY", _PROXY_URL), ("HTTP_PROXY", _PROXY_URL), ("ALL_PROXY", _PROXY_URL),
        ("NO_PROXY", ""),
    )
    for name in (key, key.lower())
}  # fmt: skip
MALFORMED = "(malformed request)"
NOT_A_CONNECTION = "(not a connection)"
_HEAD_MAX = 16 * 1024
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 30.0
_MAX_CONNECTIONS = 128
_CLOSE_S = 5.0
_PIPE_CHUNK = 1 << 20
_FDS_PER_MESSAGE = 16
# Headers a proxy consumes (RFC 9110 §7.6.1), dropped from a forwarded plain request.
_HOP_BY_HOP = {
    b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization",
    b"proxy-authenticate", b"te", b"trailer", b"upgrade",
}  # fmt: skip

Connect = Callable[[str, int, float], socket.socket]


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout_s)


@dataclass(frozen=True)
class _Request:
    host: str
    port: int
    tunnel: bool  # CONNECT; else a plain request, forwarded as ``head``
    head: bytes  # what to send upstream first (a plain request, rewritten)


class EgressProxy:
    """One sandboxed run's proxy. ``with EgressProxy(policy) as proxy``: hand
    ``proxy.sandbox_fd`` into the sandbox (as ``BRIDGE_FD``), run it, then read
    ``proxy.denied()``. Leaving the block closes every connection."""

    def __init__(self, policy: EgressPolicy, *, connect: Connect = _connect) -> None:
        self.policy = policy
        self._connect = connect
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._lock = threading.Lock()
        self._denied: Counter[str] = Counter()
        self._open: set[socket.socket] = set()
        self._serving: list[threading.Thread] = []
        self._slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        self._closed = False
        self._receiver = threading.Thread(target=self._receive, name="egress-proxy", daemon=True)

    @property
    def sandbox_fd(self) -> int:
        """The channel's end for the sandbox (ours to close once the run is over)."""
        return self._theirs.fileno()

    def __enter__(self) -> EgressProxy:
        self._receiver.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop receiving and end every relay (the sandbox is gone by now)."""
        with self._lock:
            self._closed = True
            live = list(self._open)
        self._theirs.close()
        with contextlib.suppress(OSError):
            self._ours.shutdown(socket.SHUT_RDWR)  # wakes the receiver's recvmsg
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._receiver.join(timeout=_CLOSE_S)
        # Each connection's thread ends once its sockets are shut (its refusal recorded
        # first); a connect still under way is bounded by its own timeout.
        deadline = time.monotonic() + _CLOSE_S
        for thread in self._serving:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._ours.close()

    def denied(self) -> list[tuple[str, int]]:
        """Each refused destination with how often, first refused first."""
        with self._lock:
            return list(self._denied.items())

    # ------------------------------------------------------------------ the channel

    def _receive(self) -> None:
        while True:
            try:
                _data, fds, _flags, _address = socket.recv_fds(self._ours, 64, _FDS_PER_MESSAGE)
            except OSError:
                return
            if not _data and not fds:
                return  # EOF: every holder of the sandbox's end is gone
            for fd in fds:
                self._take(fd)

    def _take(self, fd: int) -> None:
        """Serve a received descriptor in a thread of its own, if it is a connection
        and a slot is free."""
        try:
            is_socket = stat.S_ISSOCK(os.fstat(fd).st_mode)
            client = socket.socket(fileno=fd) if is_socket else None
        except OSError:
            client = None
        if client is None or client.type != socket.SOCK_STREAM:
            if client is not None:
                client.close()
            else:
                os.close(fd)
            self._deny(NOT_A_CONNECTION)
            return
        if not self._slots.acquire(blocking=False):
            client.close()
            self._deny("(too many connections)")
            return
        with self._lock:
            if self._closed:
                self._slots.release()
                client.close()
                return
            self._open.add(client)
        thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
        self._serving = [t for t in self._serving if t.is_alive()]  # only this thread's
        self._serving.append(thread)
        thread.start()

    def _deny(self, what: str) -> None:
        with self._lock:
            self._denied[what] += 1

    # ------------------------------------------------------------------ one connection

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(_HEAD_TIMEOUT_S)
            try:
                head, rest = _read_head(client)
            except OSError:  # not connected, reset, silent past the bound
                head, rest = None, b""
            request = _parse(head) if head is not None else None
            if request is None:
                self._deny(MALFORMED)
                _answer(client, 400, "Bad Request", "not a proxy request\n")
                return
            if not self.policy.allows(request.host, request.port):
                where = _shown(request.host, request.port)
                self._deny(where)
                _answer(
                    client, 403, "Forbidden",
                    f"egress to {where} is not allowed for this stage "
                    f"(allowed: {self.policy.describe()})\n",
                )  # fmt: skip
                return
            try:
                upstream = self._connect(request.host, request.port, _CONNECT_TIMEOUT_S)
            except OSError as exc:
                _answer(client, 502, "Bad Gateway", f"cannot connect: {exc.strerror or exc}\n")
                return
            with self._lock:
                self._open.add(upstream)
            client.settimeout(None)
            upstream.settimeout(None)
            if request.tunnel:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(request.head)
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
            client.close()
            if upstream is not None:
                upstream.close()
            self._slots.release()


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _read_head(client: socket.socket) -> tuple[bytes | None, bytes]:
    """The request's head (through the blank line) and whatever came after it; None
    when the connection ends or the head outgrows ``_HEAD_MAX``."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > _HEAD_MAX:
            return None, b""
        chunk = client.recv(4096)
        if not chunk:
            return None, b""
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _parse(head: bytes) -> _Request | None:
    """A ``CONNECT host:port`` or an absolute-URI ``http://`` request, else None."""
    line, _, headers = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    try:
        method, target, version = (p.decode("ascii") for p in parts)
    except UnicodeDecodeError:
        return None
    if method == "CONNECT":
        parsed = split_host_port(target, None)
        if parsed is None or parsed[1] is None:
            return None
        return _Request(parsed[0], parsed[1], True, b"")
    if not target.lower().startswith("http://") or not method.isalpha():
        return None
    authority, slash, path = target[len("http://") :].partition("/")
    if "@" in authority:
        return None
    parsed = split_host_port(authority, 80)
    if parsed is None or parsed[1] is None:
        return None
    kept = [
        h for h in headers.split(b"\r\n")
        if h and h.split(b":", 1)[0].strip().lower() not in _HOP_BY_HOP
    ]  # fmt: skip
    # One request per connection: a second one on it must not go to this host unchecked.
    rewritten = [f"{method} {slash}{path} {version}".encode(), *kept, b"Connection: close"]
    return _Request(parsed[0], parsed[1], False, b"\r\n".join(rewritten) + b"\r\n\r\n")


def _answer(client: socket.socket, code: int, reason: str, body: str) -> None:
    data = body.encode()
    with contextlib.suppress(OSError):
        client.sendall(
            f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Bytes both ways until both directions end (a half-close passed on)."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """``src`` → ``dst`` until EOF, in the kernel where it can (splice through a pipe),
    then the write side of ``dst`` shut."""
    try:
        if hasattr(os, "splice"):
            _splice(src.fileno(), dst.fileno())
        else:  # pragma: no cover - Linux has splice
            while chunk := src.recv(_PIPE_CHUNK):
                dst.sendall(chunk)
    except OSError:
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _splice(src: int, dst: int) -> None:
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):  # fewer, larger moves; the default pipe is 64 KiB
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_CHUNK)
    try:
        while True:
            moved = os.splice(src, write_end, _PIPE_CHUNK)
            if moved == 0:
                return
            while moved:
                # A write may be short; what is in the pipe must all go.
                moved -= os.splice(read_end, dst, moved)
    finally:
        os.close(read_end)
        os.close(write_end)
