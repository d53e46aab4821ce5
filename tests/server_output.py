"""What the tests' own servers (redis-server, postgres) share: their output read until
they say they are ready — waited for with a deadline, never slept on — and then read on
so that a full pipe never blocks them."""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from typing import IO


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
