"""The Executor: the one door through which the orchestrator starts a process — stages,
checks, recipes and its own git calls alike.

Callers hold an ``Executor`` (``Services.executor``), never the runner: a sandboxed or
remote executor, or a test's recording one, then replaces every process start at once.
Every one takes the same frozen ``ProcessRequest`` and answers a ``ProcessOutcome``
(``process.py``), so what a start may ask is written once. ``LocalExecutor`` runs on this
machine and delegates to ``runner``, which stays the only module that actually starts
processes (process groups, timeouts, TERM → grace → KILL).
"""

from __future__ import annotations

from typing import Protocol

from orchestrator.execution import runner
from orchestrator.execution.process import (
    CapturedHead,
    HeadRequest,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)

__all__ = [
    "CapturedHead",
    "Executor",
    "HeadRequest",
    "LocalExecutor",
    "ProcessIdentity",
    "ProcessOutcome",
    "ProcessRequest",
]


class Executor(Protocol):
    """Starts processes for the orchestrator. Both methods sweep the process group
    (``run``: every descendant, wherever it went) before they return; a program that cannot be started is a result, not an exception."""

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        """Run ``request.argv`` (no shell) to completion or timeout, output appended to
        its log (at most ``max_log_bytes`` of it on disk, head and tail; None: all of
        it). ``shown``: what the log's header says was run, when ``argv`` only wraps it
        (a sandbox); ``confine``: limits and a descriptor its process gets before its
        exec."""
        ...

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        """At most ``max_bytes`` of ``argv``'s stdout (git's own queries: HEAD, a diff)."""
        ...


class LocalExecutor:
    """Processes on this machine, through the runner."""

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        return runner.run_process(request)

    capture_head = staticmethod(runner.capture_head)
