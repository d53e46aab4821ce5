"""The Executor: the one door through which the orchestrator starts a process — stages,
checks, recipes and its own git calls alike.

Callers hold an ``Executor`` (``Services.executor``), never the runner: a sandboxed or
remote executor, or a test's recording one, then replaces every process start at once.
``LocalExecutor`` runs on this machine and delegates to ``runner``, which stays the only
module that actually starts processes (process groups, timeouts, TERM → grace → KILL).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from orchestrator.execution import runner
from orchestrator.execution.runner import CapturedHead, ProcessIdentity, ProcessOutcome

__all__ = ["CapturedHead", "Executor", "LocalExecutor", "ProcessIdentity", "ProcessOutcome"]


class Executor(Protocol):
    """Starts processes for the orchestrator. Both methods sweep the process group
    (``run``: every descendant, wherever it went) before they return; a program that cannot be started is a result, not an exception."""

    def run(
        self,
        argv: tuple[str, ...],
        *,
        cwd: Path,
        env: Mapping[str, str],
        log_path: Path,
        timeout_s: float,
        kill_after_s: float,
        on_start: Callable[[ProcessIdentity], None] | None = None,
        on_tick: Callable[[float], None] | None = None,
        tick_s: float = 1.0,
        stdin_path: Path | None = None,
        cancel: threading.Event | None = None,
        max_log_bytes: int | None = runner.DEFAULT_MAX_LOG_BYTES,
        shown: str | None = None,
        confine: runner.Confinement | None = None,
    ) -> ProcessOutcome:
        """Run ``argv`` (no shell) to completion or timeout, output appended to ``log_path``
        (at most ``max_log_bytes`` of it on disk, head and tail; None: all of it).
        ``shown``: what the log's header says was run, when ``argv`` only wraps it (a
        sandbox); ``confine``: limits and a descriptor its process gets before its exec."""
        ...

    def capture_head(
        self,
        argv: tuple[str, ...],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_bytes: int,
        timeout_s: float,
    ) -> CapturedHead:
        """At most ``max_bytes`` of ``argv``'s stdout (git's own queries: HEAD, a diff)."""
        ...


class LocalExecutor:
    """Processes on this machine, through the runner."""

    def run(
        self,
        argv: tuple[str, ...],
        *,
        cwd: Path,
        env: Mapping[str, str],
        log_path: Path,
        timeout_s: float,
        kill_after_s: float,
        on_start: Callable[[ProcessIdentity], None] | None = None,
        on_tick: Callable[[float], None] | None = None,
        tick_s: float = 1.0,
        stdin_path: Path | None = None,
        cancel: threading.Event | None = None,
        max_log_bytes: int | None = runner.DEFAULT_MAX_LOG_BYTES,
        shown: str | None = None,
        confine: runner.Confinement | None = None,
    ) -> ProcessOutcome:
        return runner.run_process(
            argv,
            cwd=cwd,
            env=env,
            log_path=log_path,
            timeout_s=timeout_s,
            kill_after_s=kill_after_s,
            on_start=on_start,
            on_tick=on_tick,
            tick_s=tick_s,
            stdin_path=stdin_path,
            cancel=cancel,
            max_log_bytes=max_log_bytes,
            shown=shown,
            confine=confine,
        )

    def capture_head(
        self,
        argv: tuple[str, ...],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_bytes: int,
        timeout_s: float,
    ) -> CapturedHead:
        return runner.capture_head(argv, cwd=cwd, env=env, max_bytes=max_bytes, timeout_s=timeout_s)
