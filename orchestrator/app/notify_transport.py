"""How a notice reaches its target (issue 40): one HTTP POST or one SMTP session, each
under one deadline, to an address that was checked before it was connected to.

* **One deadline per send**, ``timeout_s`` from its start: resolving the name,
  connecting, the TLS handshake, sending and reading the answer all take from it. Every
  socket operation waits only what is left, so a server that drips a byte every half
  second is cut off at the deadline, not given a fresh timeout per byte. A name that
  takes too long to resolve is left to its (daemon) thread: the send gives up on time.
* **The address is checked, then used**: the name is resolved once, every address it
  resolves to must be public (``domain/notify.public_address``) unless the target's
  ``allow_private`` names the host, and the connection goes to that checked address —
  never to the name again, so a DNS answer that changes in between (rebinding) changes
  nothing. A refused target is never connected to.
* **No redirect is followed**: the POST is ours, written on the socket; its answer's
  status is all that is read. A 3xx is a failed send, said as such.
* No proxy is used (``HTTP_PROXY`` and the like are not read): the check is on the
  address connected to.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Final
from urllib.parse import urlsplit

from orchestrator.domain.notify import NotifyTarget, public_address

MAX_STATUS_LINE: Final = 8192
_STATUS: Final = re.compile(rb"HTTP/1\.[01] ([1-5][0-9]{2})[ \r]")

Address = tuple[int, tuple[Any, ...]]  # (family, sockaddr) as getaddrinfo gives them
Resolve = Callable[[str, int], Sequence[Address]]
Connect = Callable[[Sequence[Address], "Deadline"], socket.socket]


class Refused(Exception):
    """The target resolves to an address it may not be sent to: nothing was sent, and
    trying again would refuse again."""


@dataclass
class Deadline:
    """The end of one send, on ``clock``."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    at: float = field(init=False)

    def __post_init__(self) -> None:
        self.at = self.clock() + self.seconds

    def left(self) -> float:
        """What is left of it; raises TimeoutError when nothing is."""
        remaining = self.at - self.clock()
        if remaining <= 0:
            raise TimeoutError("timed out")
        return remaining


def system_resolve(host: str, port: int) -> list[Address]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [(info[0], info[4]) for info in infos]


def resolve_by(host: str, port: int, deadline: Deadline, resolve: Resolve) -> list[Address]:
    """``host``'s addresses, waited for until ``deadline`` (getaddrinfo has no timeout of
    its own: it runs on a daemon thread, abandoned if it is late)."""
    answer: list[Sequence[Address] | BaseException] = []

    def run() -> None:
        try:
            answer.append(resolve(host, port))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            answer.append(exc)

    thread = threading.Thread(target=run, name="notify-resolve", daemon=True)
    thread.start()
    thread.join(deadline.left())
    if not answer:
        raise TimeoutError(f"timed out resolving {host}")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return list(answer[0])


def checked_addresses(
    host: str, port: int, target: NotifyTarget, deadline: Deadline, resolve: Resolve
) -> list[Address]:
    """The addresses to connect to for ``host``: all of them public, or the host named
    in ``allow_private``; else Refused, before any connection."""
    addresses = resolve_by(host, port, deadline, resolve)
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    if target.allows_private(host, port):
        return addresses
    for _family, sockaddr in addresses:
        if not public_address(str(sockaddr[0])):
            raise Refused(
                f"{host} is {sockaddr[0]}, not a public address: not sent (a target on a "
                f'private network is allowed by name: allow_private = ["{host}"])'
            )
    return addresses


def connect(addresses: Sequence[Address], deadline: Deadline) -> socket.socket:
    """A TCP connection to the first of ``addresses`` that answers before ``deadline``."""
    last: OSError = OSError("no address to connect to")
    for family, sockaddr in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(deadline.left())
            sock.connect(sockaddr)
            return sock
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            last = exc
    raise last


def _send_all(sock: socket.socket, data: bytes, deadline: Deadline) -> None:
    view = memoryview(data)
    while view:
        sock.settimeout(deadline.left())
        view = view[sock.send(view) :]


def _status(sock: socket.socket, deadline: Deadline) -> int:
    """The status of the answer's first line; nothing after it is read."""
    seen = b""
    while b"\n" not in seen:
        sock.settimeout(deadline.left())
        chunk = sock.recv(1024)
        if not chunk:
            raise ConnectionError("the server closed the connection without an answer")
        seen += chunk
        if len(seen) > MAX_STATUS_LINE:
            raise ConnectionError("the server's answer has no status line")
    found = _STATUS.match(seen)
    if found is None:
        raise ConnectionError("the server's answer is not HTTP")
    return int(found.group(1))


def post_json(
    url: str,
    body: bytes,
    target: NotifyTarget,
    *,
    resolve: Resolve = system_resolve,
    clock: Callable[[], float] = time.monotonic,
    connect_to: Connect | None = None,
) -> int:
    """POST ``body`` to ``url`` within ``target.timeout_s`` in all; the answer's status.
    Raises Refused (a private address not allowed by name), TimeoutError, OSError."""
    deadline = Deadline(target.timeout_s, clock)
    parts = urlsplit(url)
    host, https = parts.hostname or "", parts.scheme == "https"
    if not host or parts.scheme not in ("http", "https"):
        raise ValueError("not an http(s) URL")
    port = parts.port or (443 if https else 80)
    addresses = checked_addresses(host, port, target, deadline, resolve)
    sock = (connect_to or connect)(addresses, deadline)
    try:
        if https:
            import ssl  # here: a plain http target does not load it

            sock.settimeout(deadline.left())  # the handshake, in all
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = host if ":" not in host else f"[{host}]"
        if parts.port:
            netloc += f":{parts.port}"
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {netloc}\r\n"
            "Content-Type: application/json\r\nUser-Agent: orchestrator\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        _send_all(sock, head.encode("ascii") + body, deadline)
        return _status(sock, deadline)
    finally:
        sock.close()


def smtp_send(
    target: NotifyTarget,
    message: EmailMessage,
    environ: Mapping[str, str],
    *,
    resolve: Resolve = system_resolve,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """One SMTP session within ``target.timeout_s`` in all: at the deadline its socket is
    shut, which ends whatever the session was waiting for."""
    import smtplib  # here: a run that sends no mail does not load it (nor ssl)

    class CheckedSMTP(smtplib.SMTP):
        """smtplib's session, its connection made to a checked address within the deadline."""

        def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
            sock = connect(checked_addresses(host, port, target, deadline, resolve), deadline)
            handles.append(sock.dup())  # before the greeting is waited for: the deadline may cut it
            return sock

    deadline = Deadline(target.timeout_s, clock)
    expired = threading.Event()
    # A duplicate of the connection's descriptor: shutting it down shuts the connection,
    # whether or not STARTTLS has since wrapped (and detached) the socket smtplib holds.
    handles: list[socket.socket] = []

    def cut() -> None:
        expired.set()
        for handle in list(handles):
            try:
                handle.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    watchdog = threading.Timer(deadline.left(), cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        with CheckedSMTP(
            target.smtp_host or "", target.smtp_port, timeout=target.timeout_s
        ) as smtp:
            if expired.is_set():
                raise TimeoutError("timed out")
            if target.starttls:
                smtp.starttls()
            if target.username_env and target.password_env:
                smtp.login(
                    environ.get(target.username_env, ""), environ.get(target.password_env, "")
                )
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException):
        if expired.is_set():
            raise TimeoutError("timed out") from None
        raise
    finally:
        watchdog.cancel()
        for handle in handles:
            handle.close()
