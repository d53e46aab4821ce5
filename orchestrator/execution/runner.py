"""The one place processes start.

Every stage, check and recipe command runs through ``run_process``:
  * in a new session, so it leads its own process group and we can signal all of it;
  * stdout and stderr go straight to a log file: the orchestrator never holds output in
    memory, so a stage printing gigabytes costs us nothing;
  * on timeout: TERM to the whole group, up to ``kill_after_s`` grace, then KILL to the
    whole group; reported as exit 124 with ``timed_out=True``;
  * whatever happens (success, timeout, our own interruption) the group is swept with
    KILL before we return, so nothing the stage left behind survives it;
  * an executable that cannot be started is a result (126/127 with a message), not a
    traceback.

Reading pipes is what makes runners hang on a grandchild that keeps stdout open; we never
read one, we only wait for the leader's pid.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

# Every process we start carries a mark of its own in its environment: if our own
# SIGINT/SIGTERM lands while ``Popen`` is starting it (after exec, before ``Popen``
# returns), we have no handle on the child, and only the mark finds it.
START_MARK = "ORCH_PROCESS_MARK"

EXIT_TIMEOUT = 124  # as timeout(1) reports it
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# How often we look at a terminated group while it is still inside its grace period.
_GRACE_POLL_S = 0.02
# How quickly a cancelled wait notices (a batch stopping its workers from another thread).
_CANCEL_POLL_S = 0.1
# After KILL the kernel needs a moment to tear processes down; we wait (bounded) until
# none is left alive, so "nothing survives" holds the instant we return. The bound is
# generous: on a loaded two-core machine teardown of a group has taken over 2 s, and the
# wait ends the moment the group is gone, so a large bound costs nothing when all is well.
_KILL_SETTLE_S = 10.0
_KILL_POLL_S = 0.002


class Cancelled(Exception):
    """``run_process`` was cancelled from another thread; the group was terminated."""


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


@dataclass(frozen=True)
class ProcessIdentity:
    """Enough to find a process group again after we crashed, and not a recycled pid."""

    pgid: int
    start_ticks: int | None


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks); None when gone or no procfs."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def live_group_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies (a zombie is dead; on machines
    whose PID 1 does not reap, orphaned zombies linger and must not count as alive)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal the group; False when it has no member left to signal."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_group(pgid: int) -> None:
    """KILL every member, then wait (bounded) until none is alive."""
    if not _signal_group(pgid, signal.SIGKILL):
        return
    deadline = time.monotonic() + _KILL_SETTLE_S
    while live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(_KILL_POLL_S)


def kill_marked(name: str, value: str) -> list[int]:
    """KILL every process whose environment holds ``name=value``: the stage processes of
    one attempt, wherever they went (a new session, a re-parented daemon), even when the
    orchestrator died before it could record their group. Returns the pids killed."""
    needle = f"{name}={value}".encode()
    killed = []
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + _KILL_SETTLE_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in killed):
        time.sleep(_KILL_POLL_S)
    return killed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2 :][:1] not in ("Z", "X")


def kill_stale_group(identity: ProcessIdentity) -> bool:
    """KILL a group left behind by an orchestrator that died mid-stage. Only when the
    leader is still the very process we started (same start time), so a recycled pid is
    never hit. Returns True when something was killed."""
    if identity.start_ticks is None:
        return False
    if process_start_ticks(identity.pgid) != identity.start_ticks:
        return False
    _kill_group(identity.pgid)
    return True


def _terminate_group(proc: subprocess.Popen[bytes], kill_after_s: float) -> None:
    """TERM the group; give it ``kill_after_s`` to go (leader reaped, members gone); KILL."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + kill_after_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not live_group_members(pgid):
            return
        time.sleep(_GRACE_POLL_S)
    _kill_group(pgid)


class _ExitWaiter:
    """Wait for a child's exit with a timeout, woken the moment it exits.

    A pidfd becomes readable when the process exits; ``Popen.wait(timeout)`` instead
    polls with growing sleeps (up to 50 ms late). Falls back to it without pidfds.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def __call__(self, timeout_s: float) -> bool:
        if self.pidfd is None:
            try:
                self.proc.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        ready, _, _ = select.select([self.pidfd], [], [], max(0.0, timeout_s))
        return bool(ready)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _write_log_line(log_path: Path, text: str) -> None:
    with open(log_path, "ab") as log:
        log.write(text.encode("utf-8", "replace"))


def _start(
    argv: tuple[str, ...],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: IO[bytes] | int,
    stdout: IO[bytes] | int,
    stderr: IO[bytes] | int,
) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session (the child leads its own group), carrying a start mark.
    Our SIGINT/SIGTERM handler raises wherever the main thread is; when that is inside
    ``Popen`` after the exec, no handle ever reaches us, so the mark is how the child is
    found and killed before the interruption goes on. ``OSError`` (cannot start) is the
    caller's to report."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    try:
        return subprocess.Popen(
            argv, cwd=cwd, env={**env, START_MARK: mark},
            stdin=stdin, stdout=stdout, stderr=stderr,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    except OSError:
        raise
    except BaseException:
        kill_marked(START_MARK, mark)
        raise


def run_process(
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
) -> ProcessOutcome:
    """Run ``argv`` (no shell) to completion or timeout, output appended to ``log_path``.

    ``on_start`` is called once the group exists (persist it, to clean up after a crash);
    ``on_tick`` about every ``tick_s`` seconds with the elapsed time (for a progress line).
    ``stdin_path``: a file the process reads as its standard input (else /dev/null).
    ``cancel``: set from another thread to stop the process the way a timeout does
    (raises ``Cancelled`` once the group is gone).
    An exception raised while waiting (our own SIGINT/SIGTERM) terminates the group the
    same way a timeout does, then propagates.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC)
    _write_log_line(
        log_path,
        f"# orchestrator: {started_at.isoformat()} cwd={cwd}\n# $ {shlex.join(argv)}\n",
    )
    t0 = time.monotonic()

    def finished(
        exit_code: int,
        *,
        timed_out: bool = False,
        sig: int | None = None,
        error: str | None = None,
        pgid: int | None = None,
    ) -> ProcessOutcome:
        duration = time.monotonic() - t0
        note = f"# orchestrator: exit {exit_code} after {duration:.3f}s"
        note += " (timed out)" if timed_out else ""
        note += f" (signal {sig})" if sig else ""
        note += f" ({error})" if error else ""
        _write_log_line(log_path, note + "\n")
        return ProcessOutcome(
            argv=argv,
            exit_code=exit_code,
            timed_out=timed_out,
            signal=sig,
            started_at=started_at,
            ended_at=datetime.now(UTC),
            duration_s=duration,
            log_path=log_path,
            error=error,
            pgid=pgid,
        )

    try:
        with open(log_path, "ab") as log, open(stdin_path or os.devnull, "rb") as stdin:
            proc = _start(argv, cwd=cwd, env=env, stdin=stdin, stdout=log, stderr=subprocess.STDOUT)
    except FileNotFoundError as exc:
        missing = exc.filename if exc.filename else argv[0]
        what = "working directory" if str(missing) == str(cwd) else "executable"
        return finished(EXIT_NOT_FOUND, error=f"{what} not found: {missing}")
    except PermissionError as exc:
        return finished(EXIT_CANNOT_EXECUTE, error=f"cannot execute {argv[0]}: {exc.strerror}")
    except OSError as exc:
        return finished(EXIT_CANNOT_EXECUTE, error=f"cannot start {argv[0]}: {exc.strerror}")

    pgid = proc.pid
    exited: _ExitWaiter | None = None
    try:
        exited = _ExitWaiter(proc)
        if on_start is not None:
            on_start(ProcessIdentity(pgid=pgid, start_ticks=process_start_ticks(pgid)))
        deadline = t0 + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _terminate_group(proc, kill_after_s)
                proc.wait()
                return finished(EXIT_TIMEOUT, timed_out=True, pgid=pgid)
            if exited(min(remaining, tick_s if cancel is None else min(tick_s, _CANCEL_POLL_S))):
                returncode = proc.wait()
                break
            if cancel is not None and cancel.is_set():
                raise Cancelled(argv)
            if on_tick is not None:
                on_tick(time.monotonic() - t0)
    except BaseException:
        _terminate_group(proc, kill_after_s)
        proc.wait()
        raise
    finally:
        # The leader is gone (or we are leaving): whatever it left in its group goes too.
        _kill_group(pgid)
        if exited is not None:
            exited.close()

    if returncode < 0:
        return finished(128 - returncode, sig=-returncode, pgid=pgid)
    return finished(returncode, pgid=pgid)


@dataclass(frozen=True)
class CapturedHead:
    """The first bytes a command printed on stdout, and whether there was more."""

    data: bytes
    truncated: bool
    exit_code: int | None  # None when we stopped it ourselves after max_bytes
    error: str | None = None


def capture_head(
    argv: tuple[str, ...],
    *,
    cwd: Path,
    env: Mapping[str, str],
    max_bytes: int,
    timeout_s: float,
) -> CapturedHead:
    """Read at most ``max_bytes`` of a command's stdout, then stop it (whole group, KILL).

    For bounded reads of unbounded output (``git diff`` of a huge change): the cost is
    the cap, not the output. stderr is discarded. The group is always swept on return.
    """
    try:
        proc = _start(
            argv, cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError as exc:
        return CapturedHead(b"", False, None, error=f"cannot start {argv[0]}: {exc.strerror}")
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout_s
    truncated = timed_out = False
    try:
        fd = proc.stdout.fileno()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, min(65536, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                truncated = True
                break
    finally:
        _kill_group(proc.pid)
        proc.stdout.close()
        returncode = proc.wait()
    data = b"".join(chunks)[:max_bytes]
    if timed_out:
        return CapturedHead(data, True, None, error=f"timed out after {timeout_s}s")
    if truncated:
        return CapturedHead(data, True, None)
    return CapturedHead(data, False, returncode)
