"""What starting a process is asked and what it answers: one frozen ``ProcessRequest`` in,
one ``ProcessOutcome`` out (httpx's ``handle_request(request) -> response`` shape).

Every ``Executor`` (local, sandboxed, a test's recording one) and the runner itself take
the same request, so its fields and their defaults are written here once; an executor
that wraps a command (the sandbox) builds its own with ``dataclasses.replace``. Pure
types, no I/O: the stage programs and the reading code may import them freely.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

EXIT_TIMEOUT = 124  # as timeout(1) reports it
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024
# The reaper keeps a head and a tail of a capped log, with a marker between them: below
# this there is no room for all three.
MIN_LOG_BYTES = 4096


@dataclass(frozen=True)
class Confinement:
    """What the reaper sets in a stage's process just before it execs it: resource
    limits (``(RLIMIT_*, value)``: soft and hard, never above the hard limit given), and
    ``data`` handed over on file descriptor ``fd`` (a sandbox's seccomp program, which
    bwrap reads from a descriptor). Set there, they cost no extra process start."""

    rlimits: tuple[tuple[int, int], ...] = ()
    fd: int = 100
    data: bytes = b""


@dataclass(frozen=True)
class ProcessIdentity:
    """Enough to find a process group again after we crashed, and not a recycled pid."""

    pgid: int
    start_ticks: int | None


@dataclass(frozen=True)
class ProcessRequest:
    """Run ``argv`` (no shell) in ``cwd`` with exactly ``env``, to completion or
    ``timeout_s``, its output appended to ``log_path``.

    ``kill_after_s``: the grace between TERM and KILL on a timeout or a cancel.
    ``on_start`` is called once the group exists (persist it, to clean up after a crash);
    ``on_tick`` about every ``tick_s`` seconds with the elapsed time (for a progress line).
    ``stdin_path``: a file the process reads as its standard input (else /dev/null).
    ``cancel``: set from another thread to stop the process the way a timeout does (the
    runner then raises ``Cancelled`` once the group is gone).
    ``max_log_bytes``: what this run may add to the log on disk (head and tail kept, a
    marker line between them says how much was dropped); None: no cap.
    ``shown``: the log header's command instead of ``argv``, when ``argv`` only wraps it
    (a sandbox shows what it runs).
    ``confine``: limits and a descriptor the process gets before its exec.
    ``inherit``: descriptors of ours the process is given, as ``(ours, its number)`` (a
    sandbox's channel to its egress proxy); every other one is closed.
    ``status_fd``: the process is a wrapper that reports the raw wait status of the
    command it runs on this descriptor (the sandbox's PID 1): a command it saw killed by
    signal N is reported as killed by N, not as the 128+N it exits with.
    ``wraps_pid_namespace``: the process is a wrapper (bwrap) that runs the command in a
    PID namespace of its own, and its death ends everything inside at once: a stop's
    TERM goes only to the processes inside (never to the wrapper, nor to the namespace's
    init), so the command gets its grace; the KILL at the grace's end goes to all."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    log_path: Path
    timeout_s: float
    kill_after_s: float
    on_start: Callable[[ProcessIdentity], None] | None = None
    on_tick: Callable[[float], None] | None = None
    tick_s: float = 1.0
    stdin_path: Path | None = None
    cancel: threading.Event | None = None
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES
    shown: str | None = None
    confine: Confinement | None = None
    inherit: tuple[tuple[int, int], ...] = ()
    status_fd: int | None = None
    wraps_pid_namespace: bool = False

    def __post_init__(self) -> None:
        if self.max_log_bytes is not None and self.max_log_bytes < MIN_LOG_BYTES:
            raise ValueError(
                f"max_log_bytes must be at least {MIN_LOG_BYTES}, not {self.max_log_bytes}"
            )


@dataclass(frozen=True)
class ProcessOutcome:
    """What happened to one process group. ``exit_code`` follows the shell's convention:
    the exit status, 128+N when killed by signal N, 124 on our timeout, 126/127 when it
    could not be started."""

    argv: tuple[str, ...]
    exit_code: int
    timed_out: bool
    signal: int | None
    started_at: datetime
    ended_at: datetime
    duration_s: float
    log_path: Path
    error: str | None = None
    pgid: int | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def instant(
        cls, argv: tuple[str, ...], exit_code: int, log_path: Path, *, at: datetime,
        timed_out: bool = False, error: str | None = None,
    ) -> ProcessOutcome:  # fmt: skip
        """An outcome that took no time: a start refused (``error`` says why), or a run
        the eval reads from a case's label."""
        return cls(argv, exit_code, timed_out, None, at, at, 0.0, log_path, error)


@dataclass(frozen=True)
class HeadRequest:
    """A bounded read (git's own queries: HEAD, a diff): at most ``max_bytes`` of what
    ``argv`` prints on stdout, within ``timeout_s``."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    max_bytes: int
    timeout_s: float


@dataclass(frozen=True)
class CapturedHead:
    """The first bytes a command printed on stdout, and whether there was more."""

    data: bytes
    truncated: bool
    exit_code: int | None  # None when we stopped it ourselves after max_bytes
    error: str | None = None


class Cancelled(Exception):
    """A run was cancelled from another thread (``ProcessRequest.cancel``); the group was
    terminated."""
