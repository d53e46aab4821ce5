"""A stage killed by signal N records ``signal = N`` and exit 128+N, in the sandbox as
out of it (issue 41): bwrap turns a signalled command into an ordinary exit 128+N, so
only the sandbox's own PID 1 (``sandbox_init.py``) can tell the two apart, and the
reaper believes what it says only where bwrap's exit agrees.

Every way a stage meets a signal, each run both through the sandbox (the real bwrap) and
with ``sandbox = "none"`` (the runner alone): one it raises itself, one sent from outside
to its process, and the kernel's OOM killer (a memory cgroup, which needs root: CI runs
as root); an ordinary ``exit 139`` stays an exit, and a timeout stays a timeout. No test
sleeps to wait: a stage says it is ready on a FIFO the test reads.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.sandbox import SandboxConfig
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.process import ProcessOutcome, ProcessRequest
from orchestrator.execution.recipes import recipe_spec
from orchestrator.execution.sandbox import STATUS_FD, SandboxedExecutor
from orchestrator.execution.stage_sandbox import git_profile

from support.procfs import is_dead
from support.sandbox_required import require_sandbox

MODES = ("sandbox", "none")
ENV = {"PATH": "/usr/bin:/bin"}


def executor_for(mode: str, clone: Path) -> Executor:
    """The recipe sandbox (the clone writable, nothing else) or the runner alone."""
    if mode == "sandbox":
        require_sandbox()
        return SandboxedExecutor(LocalExecutor(), recipe_spec(clone))
    return LocalExecutor()


def run(
    mode: str, argv: tuple[str, ...], tmp_path: Path, *, timeout_s: float = 60.0
) -> ProcessOutcome:
    clone = tmp_path / "clone"
    clone.mkdir(exist_ok=True)
    return executor_for(mode, clone).run(
        ProcessRequest(
            argv, cwd=clone, env=ENV, log_path=tmp_path / "stage.log",
            timeout_s=timeout_s, kill_after_s=1.0,
        )
    )  # fmt: skip


def assert_killed_by(outcome: ProcessOutcome, signum: int, tmp_path: Path) -> None:
    log = (tmp_path / "stage.log").read_text()
    assert (outcome.exit_code, outcome.signal, outcome.timed_out) == (
        128 + signum,
        signum,
        False,
    ), log
    assert f"(signal {signum})" in log.splitlines()[-1]


def survivors(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and marker.encode() in cmdline(int(entry)):
            if not is_dead(int(entry)) and int(entry) != os.getpid():
                found.append(int(entry))
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# --------------------------------------------------------------------------- raised itself


@pytest.mark.parametrize("mode", MODES)
def test_a_stage_that_raises_sigsegv_itself_records_the_signal_and_leaves_nothing(
    mode: str, tmp_path: Path
) -> None:
    # A duration no other process here sleeps: how a left-behind child is found.
    marker = f"60.{os.getpid()}{len(mode)}"
    outcome = run(mode, ("sh", "-c", f"sleep {marker} & kill -SEGV $$"), tmp_path)
    assert_killed_by(outcome, signal.SIGSEGV, tmp_path)
    assert survivors(f"sleep\0{marker}") == []


@pytest.mark.parametrize("mode", MODES)
def test_a_python_stage_that_aborts_records_sigabrt(mode: str, tmp_path: Path) -> None:
    # As a failed assertion in C code ends: abort(3), SIGABRT (no core file: limit 0).
    code = "import os, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); os.abort()"
    outcome = run(mode, (sys.executable, "-c", code), tmp_path)
    assert_killed_by(outcome, signal.SIGABRT, tmp_path)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("code", [139, 134, 1])
def test_an_ordinary_exit_stays_an_exit_even_one_that_looks_like_a_signal(
    mode: str, code: int, tmp_path: Path
) -> None:
    outcome = run(mode, ("sh", "-c", f"exit {code}"), tmp_path)
    assert (outcome.exit_code, outcome.signal, outcome.timed_out) == (code, None, False)


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_stays_a_timeout_with_no_signal(mode: str, tmp_path: Path) -> None:
    marker = f"60.{os.getpid()}{len(mode)}7"
    outcome = run(mode, ("sh", "-c", f"sleep {marker}"), tmp_path, timeout_s=0.5)
    assert (outcome.exit_code, outcome.signal, outcome.timed_out) == (124, None, True)
    assert survivors(f"sleep\0{marker}") == []


def test_a_report_the_command_forges_is_believed_only_where_the_exit_agrees(
    tmp_path: Path,
) -> None:
    """The command does not hold the status descriptor, but it can open its PID 1's
    through /proc: what it writes there is ignored unless the exit is 128+N anyway (and
    then it claims only what killing itself with N would have said)."""
    script = (
        f"test -e /proc/self/fd/{STATUS_FD} && echo leaked; "
        f"printf '%d\\n' {signal.SIGSEGV} > /proc/1/fd/{STATUS_FD}; exit 3"
    )
    outcome = run("sandbox", ("sh", "-c", script), tmp_path)
    assert (outcome.exit_code, outcome.signal) == (3, None)
    assert "leaked" not in (tmp_path / "stage.log").read_text().splitlines()


@pytest.mark.parametrize(
    ("code", "inner", "expected"),
    [
        (139, 11, 11),  # the init saw SIGSEGV (raw status 11) and bwrap exited 128+11
        (134, 6 | 0x80, 6),  # SIGABRT with a core dumped
        (139, 139 << 8, None),  # the command itself exited 139
        (3, 11, None),  # a report the exit does not agree with
        (137, 11, None),  # nor this one: 137 is 128+9
        (-9, 11, None),  # bwrap itself was killed: its own signal is the news
        (139, None, None),  # no report (or not a number)
    ],
)
def test_the_reaper_believes_the_inits_status_only_where_the_exit_agrees(
    code: int, inner: int | None, expected: int | None
) -> None:
    from orchestrator.execution import reaper

    assert reaper.inner_signal(code, inner) == expected


def test_the_orchestrators_own_git_calls_keep_bwraps_init_and_stages_get_ours(
    tmp_path: Path,
) -> None:
    """Only what records a signal pays for the init's start: a git call needs only
    whether git succeeded."""
    require_sandbox()
    clone = tmp_path / "clone"
    clone.mkdir()
    git = git_profile(
        clone, writes=False, state_dir=tmp_path / "state", home=None, limits=SandboxConfig()
    )
    inits = []
    for spec in (recipe_spec(clone), git):
        log = tmp_path / f"{len(inits)}.log"
        outcome = SandboxedExecutor(LocalExecutor(), spec).run(
            ProcessRequest(
                ("cat", "/proc/1/cmdline"), cwd=clone, env=ENV, log_path=log, timeout_s=30,
                kill_after_s=1,
            )
        )  # fmt: skip
        assert outcome.ok, log.read_text()
        inits.append(log.read_text().splitlines()[2])
    assert "sandbox_init.py" in inits[0]
    assert "sandbox_init" not in inits[1] and "bwrap" in inits[1]


# --------------------------------------------------------------------------- from outside

# The stage says it is ready on a FIFO, then waits on a second one (or for ever).
READY_THEN_WAIT = """
import os, signal, sys
os.close(os.open(sys.argv[1], os.O_WRONLY))
if len(sys.argv) > 3:
    os.close(os.open(sys.argv[3], os.O_RDONLY))
    hoard = []
    while True:
        hoard.append(b"\\1" * (16 << 20))  # written, so every page is really used
signal.pause()
"""


class ReadyStage:
    """A stage run in a thread that opens ``ready`` (a FIFO in its clone) once it runs;
    ``wait_ready`` returns its pid (as the host sees it) once it has."""

    def __init__(self, mode: str, tmp_path: Path, *, go: bool = False) -> None:
        self.tmp_path = tmp_path
        self.clone = tmp_path / "clone"
        self.clone.mkdir(exist_ok=True)
        self.ready = self.clone / "ready"
        os.mkfifo(self.ready)
        self.go = self.clone / "go"
        marker = f"stage-{os.getpid()}-{tmp_path.name}"
        self.argv: tuple[str, ...] = (
            sys.executable,
            "-c",
            READY_THEN_WAIT,
            str(self.ready),
            marker,
        )
        if go:
            os.mkfifo(self.go)
            self.argv += (str(self.go),)
        self.executor = executor_for(mode, self.clone)
        self.outcome: ProcessOutcome | None = None
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self.outcome = run_in(self.executor, self.argv, self.clone, self.tmp_path)
        finally:
            # A stage that never opened the FIFO must not leave the test blocked on it.
            with contextlib.suppress(OSError):
                os.close(os.open(self.ready, os.O_WRONLY | os.O_NONBLOCK))

    def __enter__(self) -> ReadyStage:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGKILL)
        self.thread.join()

    def wait_ready(self) -> int:
        os.close(os.open(self.ready, os.O_RDONLY))  # returns once the stage opened it
        pids = self.pids()
        assert len(pids) == 1, (pids, self.outcome)
        return pids[0]

    def release(self) -> None:
        os.close(os.open(self.go, os.O_WRONLY))

    def pids(self) -> list[int]:
        """The stage's own process (not a wrapper whose arguments hold its argv)."""
        wanted = b"\0".join(a.encode() for a in self.argv) + b"\0"
        return [
            int(e) for e in os.listdir("/proc")
            if e.isdigit() and cmdline(int(e)) == wanted and not is_dead(int(e))
        ]  # fmt: skip

    def finished(self) -> ProcessOutcome:
        self.thread.join()
        assert self.outcome is not None
        return self.outcome


def run_in(executor: Executor, argv: tuple[str, ...], cwd: Path, tmp_path: Path) -> ProcessOutcome:
    return executor.run(
        ProcessRequest(
            argv, cwd=cwd, env=ENV, log_path=tmp_path / "stage.log", timeout_s=60.0,
            kill_after_s=1.0,
        )
    )  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_signal_sent_from_outside_to_the_stage_is_recorded(
    mode: str, signum: int, tmp_path: Path
) -> None:
    with ReadyStage(mode, tmp_path) as stage:
        os.kill(stage.wait_ready(), signum)
        outcome = stage.finished()
    assert_killed_by(outcome, signum, tmp_path)


# --------------------------------------------------------------------------- the OOM killer

_cgroups = itertools.count()


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    """A memory cgroup of ``limit_bytes`` (no swap), as the file to write a pid into to
    move it there, and the file that counts the OOM killer's kills. cgroup v1's memory
    controller, else v2's; skipped where neither can be made (not root, no controller),
    but CI, which runs as root, must have one."""
    name = f"orch-test-{os.getpid()}-{next(_cgroups)}"
    v1, v2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").is_file() and os.access(v1, os.W_OK):
        group = v1 / name
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        with contextlib.suppress(OSError):  # only where swap is accounted
            (group / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
    elif "memory" in _read(v2 / "cgroup.subtree_control").split() and os.access(v2, os.W_OK):
        group = v2 / name
        group.mkdir()
        (group / "memory.max").write_text(str(limit_bytes))
        with contextlib.suppress(OSError):
            (group / "memory.swap.max").write_text("0")
    else:
        reason = "no memory cgroup can be made here (it needs root and a memory controller)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must exercise the OOM killer, but {reason}")
        pytest.skip(reason)
    try:
        yield group
    finally:
        group.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def oom_kills(group: Path) -> int:
    """How many processes the OOM killer killed in ``group`` (v1: memory.oom_control, v2:
    memory.events)."""
    for name in ("memory.oom_control", "memory.events"):
        for line in _read(group / name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    raise AssertionError(f"no oom_kill count in {group}")


@pytest.mark.parametrize("mode", MODES)
def test_the_oom_killers_kill_is_recorded_as_sigkill(mode: str, tmp_path: Path) -> None:
    with memory_cgroup(64 << 20) as group, ReadyStage(mode, tmp_path, go=True) as stage:
        pid = stage.wait_ready()
        (group / "cgroup.procs").write_text(str(pid))
        stage.release()  # it allocates until the kernel kills it
        outcome = stage.finished()
        assert oom_kills(group) == 1
    assert_killed_by(outcome, signal.SIGKILL, tmp_path)
