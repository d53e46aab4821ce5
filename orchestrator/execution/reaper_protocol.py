"""What the runner and a stage's reaper say to each other, both ways: the spec the
runner writes on the reaper's stdin (one ``marshal`` dump: what to run, where, the log
and its cap, the grace, what to confine), and the reports the reaper writes back, read
here without ever blocking on a pipe a stage could hold. Plain data on both sides:
the reaper imports nothing of ours."""

from __future__ import annotations

import errno
import marshal
import os
import select
import time
from collections.abc import Mapping
from typing import IO, Any

from orchestrator.execution.process import EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, ProcessRequest


def reaper_spec(request: ProcessRequest, env: Mapping[str, str], parent: int) -> bytes:
    """What the reaper is told to run: ``request``, with ``env`` in place of its
    environment (the runner adds its start mark) and ``parent`` the runner's pid (a
    reaper whose parent is no longer that process ends: its runner died before the
    reaper was tied to it)."""
    confine = request.confine
    confined = None
    if confine is not None:
        confined = {"rlimits": [list(r) for r in confine.rlimits], "fd": confine.fd,
                    "data": confine.data}  # fmt: skip
    spec = {
        "argv": list(request.argv),
        "cwd": str(request.cwd),
        "env": dict(env),
        "stdin": str(request.stdin_path) if request.stdin_path is not None else None,
        "log": str(request.log_path),
        "max_log_bytes": request.max_log_bytes,
        "kill_after_s": request.kill_after_s,
        "parent": parent,
        "confine": confined,
        "inherit": [list(pair) for pair in request.inherit],
        "status_fd": request.status_fd,
        "wraps_pid_namespace": request.wraps_pid_namespace,
    }
    return marshal.dumps(spec)


class ReaperReports:
    """The reaper's messages on its stdout (a 4-byte length, then ``marshal`` of a plain
    dict): ``started`` once, then the final status. Only the reaper holds that pipe, so EOF
    means it is gone: no stage can keep it open."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.closed = False
        self.started: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None
        self.poller = select.poll()  # not select(): a busy process may hold fds past 1024
        self.poller.register(self.fd, select.POLLIN)

    def wait(self, timeout_s: float) -> None:
        """Read what arrives within ``timeout_s`` (returns at the first bytes or EOF)."""
        if self.closed:
            return
        if not self.poller.poll(max(0.0, timeout_s) * 1000):
            return
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.closed = True
                break
            self.buffer += chunk
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + size:
                break
            payload, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
            try:
                message = marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                continue
            if not isinstance(message, dict):
                continue
            if "started" in message:
                self.started = message
            else:
                self.final = message

    def wait_closed(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.closed and (remaining := deadline - time.monotonic()) > 0:
            self.wait(remaining)
        return self.closed


def start_failure(request: ProcessRequest, error: Mapping[str, Any]) -> tuple[int, str]:
    """The reaper's report of a stage that could not start, as exit code and message."""
    argv, cwd, stdin_path = request.argv, request.cwd, request.stdin_path
    step, number = error.get("step"), int(error.get("errno") or 0)
    strerror = os.strerror(number) if number else "unknown error"
    if step == "cwd" and number == errno.ENOENT:
        return EXIT_NOT_FOUND, f"working directory not found: {cwd}"
    if step == "stdin":
        return EXIT_NOT_FOUND, f"cannot open standard input {stdin_path}: {strerror}"
    if step == "exec" and number == errno.ENOENT:
        return EXIT_NOT_FOUND, f"executable not found: {argv[0]}"
    if step == "exec" and number in (errno.EACCES, errno.EPERM):
        return EXIT_CANNOT_EXECUTE, f"cannot execute {argv[0]}: {strerror}"
    return EXIT_CANNOT_EXECUTE, f"cannot start {argv[0]}: {strerror} ({step})"
