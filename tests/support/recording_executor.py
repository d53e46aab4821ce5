"""An Executor that runs everything for real (through the local executor) and records
what it was asked to start: tests see every process the orchestrator started, in
order, without monkeypatching the runner. A command started inside the sandbox is
recorded as the command itself (``ran``), and also whole (``raw``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.execution.executor import (
    CapturedHead,
    Executor,
    HeadRequest,
    LocalExecutor,
    ProcessOutcome,
    ProcessRequest,
)

# What the sandbox puts between bwrap and the command, each run as ``python -I -S FILE
# ARGS -- COMMAND``: the sandbox's init (its PID 1, which reports a signal) and the egress
# bridge.
_IN_BETWEEN = ("sandbox_init.py", "egress_bridge.py")


def unwrapped(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command a sandbox launch runs (after bwrap's own ``--chdir DIR --``, the
    sandbox's init and the egress bridge, where there are), or ``argv`` itself when it is
    not one."""
    launched = len(argv) > 3 and argv[3].endswith("sandbox_launch.py")
    if not launched and Path(argv[0]).name != "bwrap":  # bwrap alone: the sandbox's probe
        return argv
    chdir = argv.index("--chdir")
    command = argv[chdir + 3 :]
    while len(command) > 3 and command[3].endswith(_IN_BETWEEN):
        command = command[command.index("--") + 1 :]
    return command


@dataclass
class RecordingExecutor:
    inner: Executor = field(default_factory=LocalExecutor)
    ran: list[tuple[str, ...]] = field(default_factory=list)  # run() argv, in order
    captured: list[tuple[str, ...]] = field(default_factory=list)  # capture_head() argv
    cwds: list[Path] = field(default_factory=list)  # for every start, run or capture
    raw: list[tuple[str, ...]] = field(default_factory=list)  # every start as given

    @property
    def started(self) -> list[tuple[str, ...]]:
        return [*self.ran, *self.captured]

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        self.ran.append(unwrapped(request.argv))
        self.raw.append(request.argv)
        self.cwds.append(request.cwd)
        return self.inner.run(request)

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        self.captured.append(unwrapped(request.argv))
        self.raw.append(request.argv)
        self.cwds.append(request.cwd)
        return self.inner.capture_head(request)
