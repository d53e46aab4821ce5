"""What the tests' own servers (redis-server, postgres) share: started in a process group
of their own, their output read until they say they are ready — waited for with a
deadline, never slept on — and then read on so that a full pipe never blocks them."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO, Any


def free_loopback_port() -> int:
    """A port nothing listens on now (the server may still lose it: then try another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NotReady(Exception):
    """The deadline passed before the server said it was ready."""


def read_until_ready(stdout: IO[bytes], ready: str, deadline_s: float, output: list[str]) -> bool:
    """Lines of ``stdout`` appended to ``output`` until one holds ``ready`` (True), or the
    server exits first (False: a port someone else took, a bad option); ``NotReady``
    after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    pending = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotReady
            if not selector.select(timeout=left):
                continue
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                return False
            pending += chunk
            *lines, pending = pending.split(b"\n")
            output += [line.decode(errors="replace") + "\n" for line in lines]
            if any(ready in line for line in output):
                return True


def keep_draining(stdout: IO[bytes], output: list[str]) -> threading.Thread:
    """A daemon thread reading the rest of ``stdout`` into ``output``, started."""

    def drain() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stdout.fileno(), 65536):
                output.append(chunk.decode(errors="replace"))

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return thread


def start_until_ready(
    argv: Sequence[str],
    ready: str,
    deadline_s: float,
    output: list[str],
    *,
    name: str,
    error: type[Exception],
    **popen: Any,
) -> tuple[subprocess.Popen[bytes], threading.Thread] | None:
    """Start ``argv`` in a session of its own and read its output into ``output`` until
    it says ``ready``: the running process and the thread draining it on, or None when
    it exited first (try another port). Not ready within ``deadline_s``: its whole group
    killed, and ``error`` raised naming ``name`` and the output's last lines."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, **popen,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        started = read_until_ready(process.stdout, ready, deadline_s, output)
    except NotReady:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise error(
            f"{name} was not ready after {deadline_s} s:\n" + "".join(output[-30:])
        ) from None
    if not started:  # a port taken by someone else, a bad option
        process.wait()
        return None
    return process, keep_draining(process.stdout, output)
