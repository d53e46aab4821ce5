"""A real ``redis-server`` for the distributed tests: its own process group, a free
loopback port, a data dir in the test's temp dir, no persistence unless asked for.

Readiness is waited for, not slept on: the server's own "Ready to accept connections"
line (read from its output with a deadline), then a PING. ``restart()`` stops it and
starts it again on the same port, as an operator restarting Redis would.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

from support.server_output import free_loopback_port, start_until_ready

READY = "Ready to accept connections"
START_DEADLINE_S = 15.0
STOP_DEADLINE_S = 10.0


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class RedisServerError(RuntimeError):
    pass


class RedisServer:
    def __init__(
        self,
        binary: str,
        directory: Path,
        *,
        persist: bool = False,
        password: str | None = None,
    ) -> None:
        self.binary = binary
        self.directory = directory
        self.persist = persist
        self.password = password
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.output: list[str] = []
        self._drain: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's URL, with its password when it has one."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _argv(self, port: int) -> list[str]:
        argv = [
            self.binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--daemonize", "no",
            "--logfile", "",
            "--loglevel", "notice",
        ]  # fmt: skip
        if self.password:
            argv += ["--requirepass", self.password]
        return argv

    def start(self) -> None:
        """Start on the port chosen at the first start (a free one), and wait until ready."""
        self.directory.mkdir(parents=True, exist_ok=True)
        attempts = 3 if self.port is None else 1
        for _ in range(attempts):
            port = self.port if self.port is not None else free_loopback_port()
            if self._start_on(port):
                self.port = port
                return
        raise RedisServerError(
            "redis-server did not start:\n" + "".join(self.output[-30:]).rstrip()
        )

    def _start_on(self, port: int) -> bool:
        self.output = []
        started = start_until_ready(
            self._argv(port), READY, START_DEADLINE_S, self.output,
            name=f"redis-server on port {port}", error=RedisServerError,
        )  # fmt: skip
        if started is None:
            return False
        self.process, self._drain = started
        self._confirm_ping(port)
        return True

    def _confirm_ping(self, port: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=START_DEADLINE_S) as sock:
            command = b"PING\r\n"
            if self.password:
                pw = self.password.encode()
                command = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw) + command
            sock.sendall(command)
            reply = b""
            while b"PONG" not in reply:
                data = sock.recv(1024)
                if not data:
                    raise RedisServerError(f"redis-server closed the PING: {reply!r}")
                reply += data

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM (redis saves what persistence asks for, then exits), bounded wait."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._drain is not None:
            self._drain.join(timeout=STOP_DEADLINE_S)
        if process.stdout is not None:
            process.stdout.close()

    def restart(self) -> None:
        self.stop()
        self.start()
