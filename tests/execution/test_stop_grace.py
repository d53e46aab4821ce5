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
(``armed``), and the test stops it only once it has; a timeout then comes at once, the
runner's clock put forward to the deadline (the reaper's grace stays real time), so a
slow start never lets the timeout come first.
"""

from __future__ import annotations

import itertools
import os
import select
import shlex
import signal
import socket
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from orchestrator.domain.egress import egress_policy
from orchestrator.domain.errors import Interrupted
from orchestrator.execution import runner
from orchestrator.execution.egress_proxy import BRIDGE_PORT
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.process import (
    EXIT_TIMEOUT,
    Cancelled,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.recipes import recipe_spec
from orchestrator.execution.sandbox import SandboxedExecutor, SandboxSpec

from support.procfs import is_dead
from support.sandbox_required import require_sandbox

MODES = ("sandbox", "none")
ENV = {"PATH": "/usr/bin:/bin"}
# Far longer than any handler here takes: the grace is never what ends these stages.
LONG_GRACE_S = 30.0
# The runner's timeout: it comes once the stage is armed (``RunnerClock``), never before.
TIMEOUT_S = 300.0
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


class RunnerClock:
    """The runner's clock, put forward to the stage's deadline once the stage is armed:
    the timeout comes then, however long the machine took to start it (the reaper,
    another process, keeps the real clock: the grace is real time)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ahead = 0.0
        clock = types.SimpleNamespace(
            **{name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
        )
        clock.monotonic = lambda: time.monotonic() + self.ahead
        monkeypatch.setattr(runner, "time", clock)

    def jump(self, seconds: float) -> None:
        self.ahead += seconds


class Stage:
    """A stage run in ``clone`` (its working directory) with a FIFO ``armed`` there,
    stopped once it has opened it: ``stop`` is how (a timeout, a cancel, an interruption)."""

    def __init__(
        self,
        mode: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        *,
        egress: list[str] | None = None,
    ) -> None:
        self.clone = tmp_path / "clone"
        self.clone.mkdir()
        self.armed = self.clone / "armed"
        os.mkfifo(self.armed)
        self.log = tmp_path / "stage.log"
        self.executor = executor_for(mode, self.clone)
        if egress is not None:  # a sandbox whose only way out is its egress proxy
            spec = SandboxSpec(writable=(self.clone,), egress=egress_policy(egress))
            self.executor = SandboxedExecutor(LocalExecutor(), spec)
        self.clock = RunnerClock(monkeypatch)
        self.stopped_at: float | None = None  # the real clock's time of the stop

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
        self.stopped_at = time.monotonic()

    def run(
        self,
        script: str | tuple[str, ...],
        stop: str = "timeout",
        *,
        kill_after_s: float = LONG_GRACE_S,
    ) -> ProcessOutcome:
        """Runs ``script`` (shell, or an argv), stopped by ``stop`` once armed; the
        runner's own timeout is far away until then."""
        cancel = threading.Event()

        def armed_then_stopped(_: ProcessIdentity) -> None:
            self.wait_armed()
            if stop == "timeout":
                self.clock.jump(TIMEOUT_S)
            elif stop == "cancel":  # the batch's stop: set from another thread
                cancel.set()
            else:  # Ctrl-C or SIGTERM: the CLI's handler raises wherever the main thread is
                raise Interrupted(signal.SIGINT)

        return self.executor.run(
            ProcessRequest(
                ("sh", "-c", script) if isinstance(script, str) else script,
                cwd=self.clone, env=ENV, log_path=self.log,
                timeout_s=TIMEOUT_S, kill_after_s=kill_after_s, on_start=armed_then_stopped,
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


def sleeping(mark: str) -> str:
    """Shell that starts ``sleep MARK`` in the background and goes on once it runs: a
    TERM that lands between the shell's fork and the exec is lost (the child still has
    the shell's handler), and the sleep would then last until the KILL."""
    return f'sleep {mark} & while read c < /proc/$!/comm && [ "$c" != sleep ]; do :; done; '


def cleans_up(mark: str) -> str:
    """Traps TERM; its handler takes a moment, then writes ``handled`` and exits."""
    return f"trap 'sleep 0.3; echo cleaned > handled; exit 0' TERM; {sleeping(mark)}: > armed; wait"


# --------------------------------------------------------------------------- every way a stop comes


@pytest.mark.parametrize("mode", MODES)
def test_a_timed_out_stage_that_traps_term_runs_its_handler_to_the_end(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage, mark = Stage(mode, tmp_path, monkeypatch), marker()

    outcome = stage.run(cleans_up(mark), "timeout")
    ended_at = time.monotonic()

    assert stage.handled() == "cleaned"
    # The record of a timeout is as it always was.
    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []
    # The grace ended when the stage did, not when it ran out.
    assert stage.stopped_at is not None and ended_at - stage.stopped_at < LONG_GRACE_S


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_stage_that_traps_term_runs_its_handler_to_the_end(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's stop: it sets the stage's cancel from another thread."""
    stage, mark = Stage(mode, tmp_path, monkeypatch), marker()

    with pytest.raises(Cancelled):
        stage.run(cleans_up(mark), "cancel")

    assert stage.handled() == "cleaned"
    assert survivors(mark) == []


@pytest.mark.parametrize("mode", MODES)
def test_an_interrupted_orchestrator_gives_a_stage_that_traps_term_its_grace(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C or SIGTERM of the orchestrator: its handler raises ``Interrupted`` wherever
    the main thread is, here while the runner waits for the stage."""
    stage, mark = Stage(mode, tmp_path, monkeypatch), marker()

    with pytest.raises(Interrupted):
        stage.run(cleans_up(mark), "interrupt")

    assert stage.handled() == "cleaned"
    assert survivors(mark) == []


# --------------------------------------------------------------------------- what it reaches


@pytest.mark.parametrize("mode", MODES)
def test_a_process_that_left_the_commands_group_and_parent_gets_its_grace_too(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A double-forked child in a session of its own (re-parented to the sandbox's init,
    or to the reaper without one) is TERMed with the rest. The command waits for it to
    say it is done (a FIFO): in the sandbox, the command's end ends everything inside."""
    stage, mark = Stage(mode, tmp_path, monkeypatch), marker()
    os.mkfifo(stage.clone / "done")
    escaped = (
        "trap 'sleep 0.3; echo cleaned > handled-escaped; echo > done; exit 0' TERM; "
        f"{sleeping(mark)}: > armed; wait"
    )
    script = (
        "trap 'read said < done; echo cleaned > handled; exit 0' TERM; "
        f"{sleeping(mark)}( setsid sh -c {shlex.quote(escaped)} & ); wait"
    )

    outcome = stage.run(script, "timeout")

    assert stage.handled("handled-escaped") == "cleaned"
    assert stage.handled() == "cleaned"
    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []


@pytest.mark.parametrize("mode", MODES)
def test_what_ignores_term_is_killed_at_the_graces_end_and_nothing_survives(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command and a double-forked child in a session of its own both ignore TERM
    (inherited across exec): the grace runs out, KILL ends them, the record is a
    timeout's."""
    stage, mark = Stage(mode, tmp_path, monkeypatch), marker()
    grace = 0.5
    script = f"trap '' TERM; ( setsid sleep {mark} & ); sleep {mark} & : > armed; wait"

    outcome = stage.run(script, "timeout", kill_after_s=grace)
    ended_at = time.monotonic()

    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)
    assert survivors(mark) == []
    # The KILL came at the grace's end, not with the TERM.
    assert stage.stopped_at is not None
    assert ended_at - stage.stopped_at >= grace, stage.tail()


# Its TERM handler asks the egress proxy for an allowed host once a moment has passed, as
# an engine that saves its session or reports its usage on the way out would.
ASKS_ON_THE_WAY_OUT = r"""
import os, signal, socket, sys, time
port, proxy = int(sys.argv[1]), int(sys.argv[2])
def on_term(signum, frame):
    time.sleep(0.3)
    try:
        conn = socket.create_connection(("127.0.0.1", proxy), timeout=20)
        conn.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % port)
        said = conn.recv(4096).split(b"\r\n")[0].decode()
    except OSError as exc:
        said = type(exc).__name__
    open("handled", "w").write(said)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
os.close(os.open("armed", os.O_WRONLY))
while True:
    signal.pause()
"""


def test_a_sandboxed_commands_cleanup_still_reaches_its_allowed_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The egress bridge's helper is inside the sandbox, so the stop's TERM reaches it
    too; it ignores TERM (it ends with the sandbox, or at the KILL), so the command's way
    out stays open through its grace."""
    require_sandbox()
    with socket.create_server(("127.0.0.1", 0)) as host:  # connected to, never read
        port = host.getsockname()[1]
        stage = Stage("sandbox", tmp_path, monkeypatch, egress=[f"127.0.0.1:{port}"])
        argv = (sys.executable, "-c", ASKS_ON_THE_WAY_OUT, str(port), str(BRIDGE_PORT))

        outcome = stage.run(argv, "timeout")

    assert stage.handled().startswith("HTTP/1.1 200"), stage.handled()
    assert (outcome.exit_code, outcome.timed_out, outcome.signal) == (EXIT_TIMEOUT, True, None)


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
