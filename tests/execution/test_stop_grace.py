"""A stopped stage gets its grace in the sandbox as out of it (DESIGN.md, invariant 8:
TERM → grace → KILL): a command that traps TERM to clean up runs its handler to the end,
whether the stop is a timeout, the batch's stop (a cancel) or the orchestrator's own
interruption (Ctrl-C, SIGTERM), and whether it runs in the sandbox (the real bwrap) or
with ``sandbox = "none"``.

In the sandbox the reaper's child is bwrap's monitor, outside the sandbox's PID
namespace: were it TERMed with the rest, its death would kill the namespace's init and
the kernel everything inside, at once. So during the grace only the processes inside
get TERM; at its end everything gets KILL, as before, and nothing survives.

The stage's handler takes a moment (as a cleanup that flushes or removes a lock file
does) before it writes its file: it runs to the end only if the sandbox outlives the TERM.
No test waits on a sleep of its own: the stage says it has set its trap by opening a FIFO
(``armed``), and the test stops it only once it has.
"""

from __future__ import annotations

import itertools
import os
import select
import shlex
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from procfs import is_dead

from orchestrator.domain.errors import Interrupted
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.process import (
    EXIT_TIMEOUT,
    Cancelled,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.recipes import recipe_spec
from orchestrator.execution.sandbox import SandboxedExecutor

from sandbox_required import require_sandbox

MODES = ("sandbox", "none")
ENV = {"PATH": "/usr/bin:/bin"}
# Far longer than any handler here takes: the grace is never what ends these stages.
LONG_GRACE_S = 30.0
_markers = itertools.count()


def marker() -> str:
    """A duration no other process here sleeps: how a left-behind process is found."""
    return f"300.{os.getpid()}{next(_markers)}"


def executor_for(mode: str, clone: Path) -> Executor:
    """The recipe sandbox (the clone writable, nothing else) or the runner alone."""
    if mode == "sandbox":
        require_sandbox()
        return SandboxedExecutor(LocalExecutor(), recipe_spec(clone))
    return LocalExecutor()


class Stage:
    """A stage run in ``clone`` (its working directory) with a FIFO ``armed`` there."""

    def __init__(self, mode: str, tmp_path: Path) -> None:
        self.clone = tmp_path / "clone"
        self.clone.mkdir()
        self.armed = self.clone / "armed"
        os.mkfifo(self.armed)
        self.log = tmp_path / "stage.log"
        self.executor = executor_for(mode, self.clone)
        self.was_armed = False

    def wait_armed(self) -> None:
        """Returns once the stage has opened and closed ``armed`` (its trap is set)."""
        fd = os.open(self.armed, os.O_RDONLY | os.O_NONBLOCK)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            # A FIFO's read end says HUP only once a writer has come and gone.
            assert poller.poll(60_000), "the stage never said it had set its trap"
        finally:
            os.close(fd)
        self.was_armed = True

    def run(
        self,
        script: str,
        *,
        timeout_s: float = 60.0,
        kill_after_s: float = LONG_GRACE_S,
        on_start: Callable[[ProcessIdentity], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ProcessOutcome:
        return self.executor.run(
            ProcessRequest(
                ("sh", "-c", script), cwd=self.clone, env=ENV, log_path=self.log,
                timeout_s=timeout_s, kill_after_s=kill_after_s,
                on_start=on_start,
                cancel=cancel,
            )
        )  # fmt: skip

    def handled(self, name: str = "handled") -> str:
        path = self.clone / name
        return path.read_text().strip() if path.exists() else f"no {name}: {self.tail()}"

    def tail(self) -> str:
        return self.log.read_text()[-2000:] if self.log.exists() else "no log"


def survivors(mark: str) -> list[int]:
    """Live processes whose command line holds ``mark``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if mark.encode() in cmdline and not is_dead(int(entry)):
            found.append(int(entry))
    return found


def cleans_up(mark: str) -> str:
    """Traps TERM; its handler takes a moment, then writes ``handled`` and exits."""
    return f"trap 'sleep 0.3; echo cleaned > handled; exit 0' TERM; sleep {mark} & : > armed; wait"


# --------------------------------------------------------------------------- every way a stop comes


@pytest.mark.parametrize("mode", MODES)
def test_a_timed_out_stage_that_traps_term_runs_its_handler_to_the_end(
    mode: str, tmp_path: Path
) -> None:
    stage, mark = Stage(mode, tmp_path), marker()

    # The runner's clock runs while on_start waits: once it returns, the stage is armed
    # and the deadline (a second from the start) comes at once or soon after.
    t0 = time.monotonic()
    outcome = stage.run(cleans_up(mark), timeout_s=1.0, on_start=lambda _: stage.wait_armed())
    wall = time.monotonic() - t0

    assert stage.was_armed, "the stage was not armed before its timeout: " + stage.tail()
    assert stage.handled() == "cleaned"
    # The record of a timeout is as it always was.
    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []
    # The grace ended when the stage did, not when it ran out.
    assert wall < LONG_GRACE_S, wall


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_stage_that_traps_term_runs_its_handler_to_the_end(
    mode: str, tmp_path: Path
) -> None:
    """The batch's stop: it sets the stage's cancel from another thread."""
    stage, mark = Stage(mode, tmp_path), marker()
    cancel = threading.Event()

    def armed_then_cancel(_: ProcessIdentity) -> None:
        stage.wait_armed()
        cancel.set()

    with pytest.raises(Cancelled):
        stage.run(cleans_up(mark), on_start=armed_then_cancel, cancel=cancel)

    assert stage.handled() == "cleaned"
    assert survivors(mark) == []


@pytest.mark.parametrize("mode", MODES)
def test_an_interrupted_orchestrator_gives_a_stage_that_traps_term_its_grace(
    mode: str, tmp_path: Path
) -> None:
    """Ctrl-C or SIGTERM of the orchestrator: its handler raises ``Interrupted`` wherever
    the main thread is, here while the runner waits for the stage."""
    stage, mark = Stage(mode, tmp_path), marker()

    def armed_then_interrupted(_: ProcessIdentity) -> None:
        stage.wait_armed()
        raise Interrupted(signal.SIGINT)

    with pytest.raises(Interrupted):
        stage.run(cleans_up(mark), on_start=armed_then_interrupted)

    assert stage.handled() == "cleaned"
    assert survivors(mark) == []


# --------------------------------------------------------------------------- what it reaches


@pytest.mark.parametrize("mode", MODES)
def test_a_process_that_left_the_commands_group_and_parent_gets_its_grace_too(
    mode: str, tmp_path: Path
) -> None:
    """A double-forked child in a session of its own (re-parented to the sandbox's init,
    or to the reaper without one) is TERMed with the rest. The command waits for it to
    say it is done (a FIFO): in the sandbox, the command's end ends everything inside."""
    stage, mark = Stage(mode, tmp_path), marker()
    os.mkfifo(stage.clone / "done")
    escaped = (
        "trap 'sleep 0.3; echo cleaned > handled-escaped; echo > done; exit 0' TERM; "
        f"sleep {mark} & : > armed; wait"
    )
    script = (
        "trap 'read said < done; echo cleaned > handled; exit 0' TERM; "
        f"sleep {mark} & ( setsid sh -c {shlex.quote(escaped)} & ); wait"
    )

    outcome = stage.run(script, timeout_s=1.0, on_start=lambda _: stage.wait_armed())

    assert stage.was_armed, stage.tail()
    assert stage.handled("handled-escaped") == "cleaned"
    assert stage.handled() == "cleaned"
    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []


@pytest.mark.parametrize("mode", MODES)
def test_what_ignores_term_is_killed_at_the_graces_end_and_nothing_survives(
    mode: str, tmp_path: Path
) -> None:
    """The command and a double-forked child in a session of its own both ignore TERM
    (inherited across exec): the grace runs out, KILL ends them, the record is a
    timeout's."""
    stage, mark = Stage(mode, tmp_path), marker()
    grace = 0.5
    script = f"trap '' TERM; ( setsid sleep {mark} & ); : > armed; sleep {mark} & wait"

    t0 = time.monotonic()
    outcome = stage.run(
        script, timeout_s=1.0, kill_after_s=grace, on_start=lambda _: stage.wait_armed()
    )
    wall = time.monotonic() - t0

    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []
    # The KILL came at the grace's end, not with the TERM.
    assert wall >= 1.0 + grace, (wall, stage.tail())


# --------------------------------------------------------------------------- which processes


def test_only_the_processes_inside_the_namespace_but_its_init_are_termed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As /proc/PID/status's NSpid says: the reaper (1 level), bwrap's monitor (1), the
    sandbox's init (2 levels, 1 inside), the command and its children (2), the init of a
    namespace the command made itself (3 levels, 1 in the innermost: TERMed like any
    other; the kernel delivers it only if that init handles it)."""
    from orchestrator.execution import reaper

    levels = {10: [10], 11: [11], 12: [12, 1], 13: [13, 2], 14: [14, 3], 15: [15, 4, 1]}
    monkeypatch.setattr(reaper, "_nspid", levels.get)
    assert reaper.inside_namespace(10, [11, 12, 13, 14, 15, 16]) == [13, 14, 15]
    # A kernel that does not say (before 4.1): no telling, so TERM goes to all as before.
    monkeypatch.setattr(reaper, "_nspid", lambda pid: None)
    assert reaper.inside_namespace(10, [11, 12, 13]) is None
