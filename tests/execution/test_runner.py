"""``orchestrator.execution.runner`` with real processes and real signals.

No test sleeps to wait for something: processes we start may sleep, but the tests wait only
on events (a process exiting, a pipe delivering a line, a pidfd becoming readable).

PID 1 on some machines (containers) does not reap orphans, so an orphan that died stays a
zombie: "dead" below means gone from /proc or in state Z/X, never "kill(pid, 0) fails".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.domain.errors import Interrupted
from orchestrator.execution import process_groups, runner
from orchestrator.execution.process import (
    DEFAULT_MAX_LOG_BYTES,
    EXIT_CANNOT_EXECUTE,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    HeadRequest,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.process_groups import (
    kill_stale_group,
    live_group_members,
    process_start_ticks,
)
from orchestrator.execution.runner import run_process

from conftest import ROOT, subprocess_env
from support.procfs import is_dead, proc_state

TIMEOUT_S = 1.0
GRACE_S = 1.0


# --------------------------------------------------------------------------- helpers


def assert_no_live_member(pgid: int) -> None:
    live = live_group_members(pgid)
    states = [(pid, proc_state(pid)) for pid in live]  # re-read: may have died since
    assert live == [], f"group {pgid} had live members after the call: {states}"


def run(
    argv: tuple[str, ...],
    tmp_path: Path,
    *,
    timeout_s: float = TIMEOUT_S,
    kill_after_s: float = GRACE_S,
    env: dict[str, str] | None = None,
    log_name: str = "stage.log",
    **kwargs: object,
) -> tuple[ProcessOutcome, float]:
    """run_process with the test defaults; returns the outcome and the wall time we saw."""
    t0 = time.monotonic()
    outcome = run_process(
        ProcessRequest(
            argv,
            cwd=tmp_path,
            env=dict(os.environ) if env is None else env,
            log_path=tmp_path / log_name,
            timeout_s=timeout_s,
            kill_after_s=kill_after_s,
            **kwargs,  # type: ignore[arg-type]
        )
    )
    return outcome, time.monotonic() - t0


def read_pid(path: Path) -> int:
    text = path.read_text().strip()
    assert text.isdigit(), (
        f"pid file {path} holds {text!r}: the stage did not record its grandchild"
    )
    return int(text)


# --------------------------------------------------------------------------- timeout matrix


@dataclass(frozen=True)
class Case:
    script: str  # sh -c script; "{pidfile}" is replaced with the quoted path of a pid file
    exit_code: int
    timed_out: bool
    signal: int | None
    min_wall: float
    max_wall: float
    grandchild: bool = False  # the script writes a grandchild's pid to {pidfile}


# The grandchild inherits an *ignored* TERM through exec (dispositions set to SIG_IGN survive
# execve), so only KILL can stop it.
_STUBBORN_GRANDCHILD = "(trap '' TERM; exec sleep 30) & echo $! > {pidfile}"

MATRIX = {
    "exits-0": Case("exit 0", 0, False, None, 0.0, 0.9),
    "exits-3": Case("exit 3", 3, False, None, 0.0, 0.9),
    # Dies on TERM: the runner must not spend the grace period once the group is gone.
    "dies-on-term": Case("sleep 30", EXIT_TIMEOUT, True, None, TIMEOUT_S, TIMEOUT_S + 0.5),
    # Ignores TERM: only the KILL at the end of the grace period ends it.
    "traps-term-needs-kill": Case(
        "trap '' TERM; while :; do sleep 0.1; done",
        EXIT_TIMEOUT,
        True,
        None,
        TIMEOUT_S + GRACE_S - 0.05,
        TIMEOUT_S + GRACE_S + 1.0,
    ),
    # The leader dies on TERM but its grandchild does not: the grace period runs out (the
    # group still has a live member) and KILL reaches the grandchild.
    "grandchild-ignores-term": Case(
        _STUBBORN_GRANDCHILD + "; wait",
        EXIT_TIMEOUT,
        True,
        None,
        TIMEOUT_S + GRACE_S - 0.05,
        TIMEOUT_S + GRACE_S + 1.0,
        grandchild=True,
    ),
    # The leader exits at once; the grandchild keeps the log fd (its stdout) open. A runner
    # that read a pipe to EOF would hang here until the timeout.
    "grandchild-holds-stdout": Case(
        _STUBBORN_GRANDCHILD + "; exit 0", 0, False, None, 0.0, 0.9, grandchild=True
    ),
    # Killed by a signal of its own: 128+9, not a timeout.
    "killed-by-own-signal": Case("kill -9 $$", 128 + 9, False, 9, 0.0, 0.9),
}


@pytest.mark.parametrize("case", list(MATRIX.values()), ids=list(MATRIX))
def test_timeout_matrix(case: Case, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = case.script.replace("{pidfile}", shlex.quote(str(pidfile)))

    outcome, wall = run(("sh", "-c", script), tmp_path)

    assert outcome.exit_code == case.exit_code
    assert outcome.timed_out is case.timed_out
    assert outcome.signal == case.signal
    assert outcome.error is None
    assert outcome.ok is (case.exit_code == 0 and not case.timed_out)
    assert case.min_wall <= wall <= case.max_wall, f"wall {wall:.3f}s"
    assert wall <= TIMEOUT_S + GRACE_S + 1.0
    assert outcome.pgid is not None
    assert_no_live_member(outcome.pgid)
    if case.grandchild:
        grandchild = read_pid(pidfile)
        assert is_dead(grandchild), f"grandchild {grandchild} is {proc_state(grandchild)}"
    footer = (tmp_path / "stage.log").read_text().splitlines()[-1]
    assert footer.startswith(f"# orchestrator: exit {case.exit_code} after ")
    assert ("(timed out)" in footer) is case.timed_out


# --------------------------------------------------------------------------- start failures


def test_missing_executable_is_127_not_an_exception(tmp_path: Path) -> None:
    name = "orchestrator-no-such-program-7d1f"
    outcome, _ = run((name, "--flag"), tmp_path)

    assert outcome.exit_code == EXIT_NOT_FOUND == 127
    assert outcome.error == f"executable not found: {name}"
    assert not outcome.timed_out and outcome.signal is None and not outcome.ok
    assert outcome.pgid is None
    log = (tmp_path / "stage.log").read_text()
    assert f"# $ {name} --flag" in log
    assert f"executable not found: {name}" in log
    assert "exit 127" in log


def test_missing_working_directory_is_reported_as_such(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    outcome = run_process(
        ProcessRequest(
            ("true",),
            cwd=missing,
            env=dict(os.environ),
            log_path=tmp_path / "stage.log",
            timeout_s=TIMEOUT_S,
            kill_after_s=GRACE_S,
        )
    )
    assert outcome.exit_code == 127
    assert outcome.error == f"working directory not found: {missing}"


def test_non_executable_file_is_126_with_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "stage.sh"
    script.write_text("#!/bin/sh\necho should not run\n")
    script.chmod(0o644)

    outcome, _ = run((str(script),), tmp_path)

    assert outcome.exit_code == EXIT_CANNOT_EXECUTE == 126
    assert outcome.error is not None
    assert outcome.error.startswith(f"cannot execute {script}")
    assert "Permission denied" in outcome.error
    log = (tmp_path / "stage.log").read_text()
    assert "should not run" not in log
    assert outcome.error in log


def test_a_bare_name_is_looked_for_along_the_stages_path_as_execvpe_does(tmp_path: Path) -> None:
    # The reaper searches PATH itself (it does without ``os``): a directory that is not
    # there, one whose match is not executable, then the program; a name not found at
    # all, and one found only unexecutable, fail as ``os.execvpe`` fails.
    locked, good = tmp_path / "locked", tmp_path / "good"
    for where, mode in ((locked, 0o644), (good, 0o755)):
        where.mkdir()
        tool = where / "tool-x"
        tool.write_text(f"#!/bin/sh\necho ran from {where.name}\n")
        tool.chmod(mode)
    path = f"{tmp_path / 'absent'}:{locked}:{good}:/usr/bin:/bin"
    outcome, _ = run(("tool-x",), tmp_path, env={"PATH": path})
    assert outcome.exit_code == 0
    assert "ran from good" in (tmp_path / "stage.log").read_text()

    only_locked, _ = run(("tool-x",), tmp_path, env={"PATH": str(locked)}, log_name="a.log")
    assert only_locked.exit_code == EXIT_CANNOT_EXECUTE == 126
    assert only_locked.error is not None and "Permission denied" in only_locked.error

    nowhere, _ = run(("tool-x",), tmp_path, env={"PATH": str(tmp_path / "absent")},
                     log_name="b.log")  # fmt: skip
    assert nowhere.exit_code == EXIT_NOT_FOUND == 127
    assert nowhere.error == "executable not found: tool-x"

    # No PATH at all: the default path (/bin:/usr/bin), as execvpe.
    default, _ = run(("true",), tmp_path, env={}, log_name="c.log")
    assert default.exit_code == 0


# --------------------------------------------------------------------------- log and environment


def test_output_goes_to_the_log_with_stderr_interleaved_header_and_footer(tmp_path: Path) -> None:
    argv = ("sh", "-c", "echo out-1; echo err-1 >&2; echo out-2; echo err-2 >&2; exit 5")
    outcome, _ = run(argv, tmp_path)

    assert outcome.exit_code == 5
    assert outcome.log_path == tmp_path / "stage.log"
    lines = outcome.log_path.read_text().splitlines()
    assert lines[0].startswith("# orchestrator: ") and f"cwd={tmp_path}" in lines[0]
    assert lines[1] == f"# $ {shlex.join(argv)}"
    assert lines[2:6] == ["out-1", "err-1", "out-2", "err-2"]
    assert re.fullmatch(r"# orchestrator: exit 5 after \d+\.\d{3}s", lines[6])
    assert len(lines) == 7


def test_log_is_appended_not_truncated(tmp_path: Path) -> None:
    run(("sh", "-c", "echo first"), tmp_path)
    run(("sh", "-c", "echo second"), tmp_path)
    body = [
        ln for ln in (tmp_path / "stage.log").read_text().splitlines() if not ln.startswith("#")
    ]
    assert body == ["first", "second"]


def test_child_sees_exactly_the_environment_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_MUST_NOT_LEAK", "1")  # in our environment, not in the one passed
    env = {"PATH": os.environ["PATH"], "ORCH_TEST_VALUE": "a b=c 'q' $HOME"}

    outcome, _ = run(("env",), tmp_path, env=env)

    assert outcome.exit_code == 0
    body = [
        ln for ln in (tmp_path / "stage.log").read_text().splitlines() if not ln.startswith("# ")
    ]
    seen = dict(line.split("=", 1) for line in body)
    # Plus the runner's own start mark, which finds a child an interrupt left us no handle on.
    assert seen.pop(runner.START_MARK).startswith(f"{os.getpid()}-")
    assert seen == env


def test_stdin_is_not_inherited(tmp_path: Path) -> None:
    # Our fd 0 becomes a pipe nobody writes to (pytest has it on /dev/null already): `cat`
    # inheriting it would block until the timeout.
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        outcome, _ = run(("cat",), tmp_path)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert outcome.exit_code == 0 and not outcome.timed_out


# --------------------------------------------------------------------------- callbacks


def test_on_start_gets_the_group_and_its_start_ticks(tmp_path: Path) -> None:
    seen: list[tuple[ProcessIdentity, int | None, int, int, str]] = []

    def on_start(identity: ProcessIdentity) -> None:
        pid = identity.pgid
        raw = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(raw[raw.rfind(")") + 2 :].split()[19])
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        seen.append((identity, ticks, os.getpgid(pid), os.getsid(pid), comm))

    outcome, _ = run(("sleep", "0.3"), tmp_path, on_start=on_start)

    assert outcome.exit_code == 0
    assert len(seen) == 1
    identity, ticks_in_proc, pgid, sid, comm = seen[0]
    assert identity.pgid == outcome.pgid
    assert identity.start_ticks is not None
    assert identity.start_ticks == ticks_in_proc
    assert identity.start_ticks != process_start_ticks(os.getpid())
    assert pgid == identity.pgid and sid == identity.pgid  # leads its own session and group
    assert comm == "sleep"


def test_on_tick_is_called_while_the_process_runs(tmp_path: Path) -> None:
    ticks: list[float] = []

    outcome, _ = run(("sleep", "1.5"), tmp_path, timeout_s=10.0, on_tick=ticks.append, tick_s=0.2)

    assert outcome.exit_code == 0
    assert len(ticks) > 0
    assert len(ticks) >= 3  # ~7 expected; 3 leaves room for a loaded machine
    assert ticks == sorted(ticks)
    assert all(0.1 <= t <= 2.5 for t in ticks), ticks


def test_exception_in_on_tick_terminates_the_group_and_propagates(tmp_path: Path) -> None:
    # Leader and grandchild both ignore TERM: the runner has to escalate to KILL.
    pidfile = tmp_path / "grandchild.pid"
    script = _STUBBORN_GRANDCHILD.replace("{pidfile}", shlex.quote(str(pidfile)))
    script = f"trap '' TERM; {script}; wait"
    identities: list[ProcessIdentity] = []

    raised: list[float] = []

    def on_tick(elapsed: float) -> None:
        # Once the stage has started and its grandchild is there (a tick may come first
        # on a busy machine, before the reaper reported the start).
        if identities and pidfile.exists() and pidfile.read_text().strip():
            raised.append(time.monotonic())
            raise Interrupted(signal.SIGTERM)  # what cli's SIGTERM handler raises

    with pytest.raises(Interrupted):
        run(
            ("sh", "-c", script),
            tmp_path,
            timeout_s=30.0,
            kill_after_s=0.5,
            on_start=identities.append,
            on_tick=on_tick,
            tick_s=0.2,
        )
    stopped_after = time.monotonic() - raised[0]

    assert len(identities) == 1
    assert_no_live_member(identities[0].pgid)
    grandchild = read_pid(pidfile)
    assert is_dead(grandchild), f"grandchild {grandchild} is {proc_state(grandchild)}"
    # Stopped by the exception (TERM, 0.5 s of grace, KILL), not by the 30 s timeout.
    assert stopped_after < 10.0, f"{stopped_after:.3f}s after the exception: not stopped by it"


# The stage's TERM trap runs (and can clean up) before anything is KILLed. `wait` is
# interrupted by a trapped signal, a foreground `sleep` would not be.
# (The marker is computed so that the command line in the log header does not contain it.)
_CLEANUP_ON_TERM = "trap 'echo cleaned-up-$((6 * 7)); exit 0' TERM; sleep 30 & wait"
_CLEANED_UP = "cleaned-up-42"


def test_timeout_sends_term_first_so_the_stage_can_clean_up(tmp_path: Path) -> None:
    outcome, wall = run(("sh", "-c", _CLEANUP_ON_TERM), tmp_path)

    assert outcome.exit_code == EXIT_TIMEOUT and outcome.timed_out
    assert _CLEANED_UP in (tmp_path / "stage.log").read_text().splitlines()
    assert wall < TIMEOUT_S + GRACE_S
    assert outcome.pgid is not None
    assert_no_live_member(outcome.pgid)


def test_exception_in_on_tick_sends_term_first(tmp_path: Path) -> None:
    def on_tick(elapsed: float) -> None:
        raise Interrupted(signal.SIGINT)

    with pytest.raises(Interrupted):
        run(("sh", "-c", _CLEANUP_ON_TERM), tmp_path, timeout_s=30.0, on_tick=on_tick, tick_s=0.2)

    assert _CLEANED_UP in (tmp_path / "stage.log").read_text().splitlines()


def test_exception_in_on_start_leaves_no_process(tmp_path: Path) -> None:
    identities: list[ProcessIdentity] = []

    def on_start(identity: ProcessIdentity) -> None:
        identities.append(identity)
        raise OSError("could not persist the identity")

    with pytest.raises(OSError, match="could not persist"):
        run(("sleep", "30"), tmp_path, timeout_s=30.0, on_start=on_start)

    assert_no_live_member(identities[0].pgid)


# --------------------------------------------------------------------------- kill_stale_group


def _wait_for_exit(pidfd: int, timeout_s: float) -> bool:
    """Block until the process behind ``pidfd`` has exited (zombie counts)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


@pytest.fixture
def stale_group() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A live group as an orchestrator that crashed mid-stage would leave it: a session
    leader waiting on a grandchild. Yields (leader, grandchild pid)."""
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 30 & echo $!; wait"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())  # blocks until the grandchild exists
    try:
        yield leader, grandchild
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        leader.stdout.close()
        if live_group_members(leader.pid):
            os.killpg(leader.pid, signal.SIGKILL)


def test_kill_stale_group_kills_the_group_when_start_ticks_match(
    stale_group: tuple[subprocess.Popen[bytes], int],
) -> None:
    leader, grandchild = stale_group
    ticks = process_start_ticks(leader.pid)
    assert ticks is not None
    assert sorted(live_group_members(leader.pid)) == sorted([leader.pid, grandchild])
    grandchild_fd = os.pidfd_open(grandchild)
    try:
        assert kill_stale_group(ProcessIdentity(pgid=leader.pid, start_ticks=ticks)) is True

        assert leader.wait(timeout=5) == -signal.SIGKILL
        assert _wait_for_exit(grandchild_fd, 5.0), "grandchild survived"
    finally:
        os.close(grandchild_fd)
    assert is_dead(grandchild)
    assert live_group_members(leader.pid) == []


def test_kill_stale_group_refuses_when_start_ticks_differ(
    stale_group: tuple[subprocess.Popen[bytes], int],
) -> None:
    leader, grandchild = stale_group
    ticks = process_start_ticks(leader.pid)
    assert ticks is not None

    # A recycled pid: same number, another process (another start time).
    assert kill_stale_group(ProcessIdentity(pgid=leader.pid, start_ticks=ticks + 1)) is False
    assert kill_stale_group(ProcessIdentity(pgid=leader.pid, start_ticks=None)) is False

    assert leader.poll() is None
    assert sorted(live_group_members(leader.pid)) == sorted([leader.pid, grandchild])


def test_kill_stale_group_of_a_vanished_leader_is_false() -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    ticks = process_start_ticks(proc.pid)
    proc.wait()
    assert kill_stale_group(ProcessIdentity(pgid=proc.pid, start_ticks=ticks)) is False


# --------------------------------------------------------------------------- memory


_MEMORY_DRIVER = """
import json, os, resource, sys
from pathlib import Path
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.runner import run_process

log = Path(sys.argv[1])
chunks = int(sys.argv[2])
child = (
    "import sys\\n"
    "chunk = b'x' * 1023 + b'\\\\n'\\n"
    "block = chunk * 1024\\n"
    f"for _ in range({chunks}):\\n"
    "    sys.stdout.buffer.write(block)\\n"
)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
outcome = run_process(ProcessRequest(
    (sys.executable, "-c", child),
    cwd=log.parent,
    env=dict(os.environ),
    log_path=log,
    timeout_s=90.0,
    kill_after_s=2.0,
))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "exit_code": outcome.exit_code,
    "maxrss_before_kb": before,
    "maxrss_after_kb": after,
    "log_size": log.stat().st_size,
}))
"""


@pytest.mark.slow
def test_large_output_does_not_grow_orchestrator_memory(tmp_path: Path) -> None:
    chunks = 200  # MiB
    driver = tmp_path / "driver.py"
    driver.write_text(_MEMORY_DRIVER)
    log = tmp_path / "big.log"
    try:
        result = subprocess.run(
            [sys.executable, str(driver), str(log), str(chunks)],
            cwd=ROOT,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=110,
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["exit_code"] == 0
        # 200 MiB printed, the default cap kept on disk (head, marker, tail and our lines).
        assert DEFAULT_MAX_LOG_BYTES // 2 < report["log_size"]
        assert report["log_size"] <= DEFAULT_MAX_LOG_BYTES + 4096
        growth_bytes = (report["maxrss_after_kb"] - report["maxrss_before_kb"]) * 1024
        assert growth_bytes < 50 * 1000 * 1000, report
    finally:
        log.unlink(missing_ok=True)


def test_kill_marked_finds_an_attempts_processes_by_their_environment(tmp_path: Path) -> None:
    """Even a process that left the group (its own session) carries the attempt marker."""
    from orchestrator.execution.runner import kill_marked

    marked = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "ORCH_ATTEMPT_ID": "R-1#2"}, start_new_session=True
    )
    other = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "ORCH_ATTEMPT_ID": "R-1#3"}, start_new_session=True
    )
    try:
        assert kill_marked("ORCH_ATTEMPT_ID", "R-1#2") == [marked.pid]
        assert marked.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        other.kill()
        other.wait(timeout=10)


def test_stdin_comes_from_a_file_when_given(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("fix the deal\n")
    outcome = run_process(
        ProcessRequest(
            ("cat",), cwd=tmp_path, env=os.environ, log_path=tmp_path / "cat.log",
            timeout_s=10, kill_after_s=1, stdin_path=prompt,
        )
    )  # fmt: skip
    assert outcome.exit_code == 0
    assert "fix the deal" in (tmp_path / "cat.log").read_text()


def test_a_cancelled_wait_terminates_the_group_and_raises(tmp_path: Path) -> None:
    import threading

    from orchestrator.execution.process import Cancelled

    cancel = threading.Event()
    started: list[int] = []

    def on_start(identity: object) -> None:
        started.append(identity.pgid)  # type: ignore[attr-defined]
        cancel.set()  # as a batch's main thread would, on SIGTERM

    with pytest.raises(Cancelled):
        run_process(
            ProcessRequest(
                ("sleep", "30"), cwd=tmp_path, env=os.environ, log_path=tmp_path / "c.log",
                timeout_s=30, kill_after_s=1, on_start=on_start, cancel=cancel,
            )
        )  # fmt: skip
    assert live_group_members(started[0]) == []


def test_the_local_executor_runs_and_captures_through_the_runner(tmp_path: Path) -> None:
    """What every caller holds: the same process groups, logs and bounded reads."""
    from orchestrator.execution.executor import Executor, LocalExecutor

    executor: Executor = LocalExecutor()
    seen: list[int] = []
    outcome = executor.run(
        ProcessRequest(
            ("bash", "-c", "echo out; echo err >&2; exit 3"),
            cwd=tmp_path, env={"PATH": os.environ["PATH"]}, log_path=tmp_path / "x.log",
            timeout_s=30, kill_after_s=1, on_start=lambda identity: seen.append(identity.pgid),
        )
    )  # fmt: skip
    assert (outcome.exit_code, outcome.ok, outcome.pgid) == (3, False, seen[0])
    assert "\nout\nerr\n# orchestrator: exit 3 after " in (tmp_path / "x.log").read_text()
    assert_no_live_member(seen[0])
    head = executor.capture_head(HeadRequest(
        ("bash", "-c", "yes | head -c 100000"),
        cwd=tmp_path, env={"PATH": os.environ["PATH"]}, max_bytes=10, timeout_s=30,
    ))  # fmt: skip
    assert (head.data, head.truncated, head.exit_code) == (b"y\ny\ny\ny\ny\n", True, None)
    missing = executor.run(
        ProcessRequest(
            ("no-such-program-here",), cwd=tmp_path, env={"PATH": os.environ["PATH"]},
            log_path=tmp_path / "y.log", timeout_s=5, kill_after_s=1,
        )
    )  # fmt: skip
    assert missing.exit_code == 127 and missing.error


@pytest.mark.parametrize("start", ["run_process", "capture_head"])
def test_an_interrupt_landing_inside_popen_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    """Our SIGTERM handler raises wherever the main thread is. When that is inside
    ``Popen`` after the child was exec'd, ``Popen`` never returns a handle: the child must
    still not outlive the interruption."""
    started: list[int] = []
    real_init = subprocess.Popen.__init__

    def init_then_interrupted(self: subprocess.Popen[bytes], *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        started.append(self.pid)
        raise KeyboardInterrupt  # as if the signal landed just before Popen returned

    monkeypatch.setattr(subprocess.Popen, "__init__", init_then_interrupted)
    argv = ("sleep", "60")
    with pytest.raises(KeyboardInterrupt):
        if start == "run_process":
            runner.run_process(
                ProcessRequest(
                    argv, cwd=tmp_path, env=dict(os.environ), log_path=tmp_path / "log",
                    timeout_s=30, kill_after_s=1,
                )
            )  # fmt: skip
        else:
            runner.capture_head(
                HeadRequest(argv, cwd=tmp_path, env=dict(os.environ), max_bytes=10, timeout_s=30)
            )
    monkeypatch.undo()
    [pid] = started
    assert not process_groups._alive(pid), f"pid {pid} survived the interruption"
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)  # reap it, unless the abandoned Popen already did


def test_the_orphan_sweep_picks_only_what_came_from_a_started_process() -> None:
    """Children of ours, in a session not ours, started no earlier than the process whose
    end is swept after, and not started by the runner: nothing else is ended."""
    me, session, since = 100, 100, 5000
    stat = process_groups._Stat
    table = {
        200: stat(me, 200, 5000),  # an orphan handed to us: in a session of its own
        201: stat(me, 777, 6000),  # one still in the dead stage's session
        300: stat(me, 300, 6000),  # a reaper the runner started and has not reaped
        400: stat(me, session, 6000),  # forked here by a pool: our session
        500: stat(me, 500, 4999),  # a helper in a session of its own, started earlier
        600: stat(201, 600, 6000),  # an orphan's child: taken with it, not picked itself
    }
    picked = process_groups.pick_orphans(
        table, me=me, my_session=session, since=since, started={300}
    )
    assert picked == [200, 201]
    assert sorted(process_groups._subtrees(picked, table)) == [200, 201, 600]
