"""The one place processes start.

Every stage, check and recipe command runs through ``run_process``, by way of a small
per-run supervisor, the reaper (``reaper.py`` beside this file, the runner's other half
and the only other module that starts a process):
  * the stage runs in a new session, so it leads its own process group;
  * the reaper is a child subreaper (Linux): every descendant of the stage, even one that
    started a new session, double-forked and cleared its environment, is re-parented to it
    instead of to PID 1, and when the stage ends (success, failure, timeout, our own
    interruption, our own death) the reaper KILLs and reaps all of them;
  * stdout and stderr go to a pipe only the reaper reads; it writes the log capped on disk
    (``max_log_bytes``: head and tail kept, a marker says how much was dropped), so a stage
    printing gigabytes costs neither our memory nor the disk;
  * on timeout: TERM to everything the stage started, up to ``kill_after_s`` grace, then
    KILL; reported as exit 124 with ``timed_out=True``;
  * whatever happens the stage's group is swept with KILL again before we return, and a
    reaper that vanished without reporting is backed by the environment mark;
  * a stage can kill its own reaper (same user; its parent's pid is no secret): this
    process is a child subreaper too, so what the dead reaper held is re-parented to us,
    not to PID 1, and ``end_orphans`` KILLs and reaps it before we return (a descendant
    that left its session and cleared its environment included);
  * an executable that cannot be started is a result (126/127 with a message), not a
    traceback.

Reading a stage's pipe is what makes runners hang on a grandchild that keeps stdout open;
we never read one: we read the reaper's reports, a pipe no stage ever holds, and the
reaper stops reading the stage's once every descendant is dead (EOF) or after a bound.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import marshal
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

# Every process we start carries a mark of its own in its environment: if our own
# SIGINT/SIGTERM lands while ``Popen`` is starting it (after exec, before ``Popen``
# returns), we have no handle on the child, and only the mark finds it.
START_MARK = "ORCH_PROCESS_MARK"


@dataclass(frozen=True)
class Confinement:
    """What the reaper sets in a stage's process just before it execs it: resource
    limits (``(RLIMIT_*, value)``: soft and hard, never above the hard limit given), and
    ``data`` handed over on file descriptor ``fd`` (a sandbox's seccomp program, which
    bwrap reads from a descriptor). Set there, they cost no extra process start."""

    rlimits: tuple[tuple[int, int], ...] = ()
    fd: int = 100
    data: bytes = b""


EXIT_TIMEOUT = 124  # as timeout(1) reports it
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# How quickly a cancelled wait notices (a batch stopping its workers from another thread).
_CANCEL_POLL_S = 0.1
# After KILL the kernel needs a moment to tear processes down; we wait (bounded) until
# none is left alive, so "nothing survives" holds the instant we return. The bound is
# generous: on a loaded two-core machine teardown of a group has taken over 2 s, and the
# wait ends the moment the group is gone, so a large bound costs nothing when all is well.
_KILL_SETTLE_S = 10.0
_KILL_POLL_S = 0.002
# How long a child of ours may take to finish its execve (see _environ_of).
_EXEC_SETTLE_S = 0.5
# How long, past the grace period, a stopped reaper may take to KILL, reap, drain the pipe
# and assemble the log before we KILL it too (its own bounds add up to less).
_REAPER_SLACK_S = 30.0
# A reaper that reported its end exits at once; this only bounds a broken one.
_REAPER_EXIT_S = 10.0

REAPER = Path(__file__).with_name("reaper.py")
# Imported from its directory rather than run by path: a script run by path is compiled
# on every start (3 ms of a ~10 ms start-up), an imported module comes from its cached
# bytecode. Nothing else in that directory is put to use (its names shadow nothing the
# reaper imports: tests/test_boundaries.py checks it), and the entry is dropped at once.
_REAPER_BOOT = (
    f"import sys; sys.path.insert(0, {str(REAPER.parent)!r}); import reaper; "
    "del sys.path[0]; reaper.posix._exit(reaper.main())"
)
DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024
MIN_LOG_BYTES = 4096
PR_SET_CHILD_SUBREAPER = 36


class _Started:
    """The children this process started here and has not waited for yet: every other
    child of ours in a session of its own is an orphan handed to us (see ``end_orphans``).
    ``lock`` is held while a child is being started and registered, and while orphans
    are picked out, so a child caught between ``fork`` and registration is never taken
    for one. A forked copy of this process (a pool worker) starts with none, an unheld
    lock, and is not yet a subreaper: the kernel does not carry that flag over a fork."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.lock = threading.Lock()
        self.pids: set[int] = set()
        self.subreaper = False


_STARTED = _Started()
os.register_at_fork(after_in_child=_STARTED.reset)


def _become_subreaper() -> None:
    """Orphans below us come to us rather than to PID 1 (Linux), once per process: the
    reaper is the stage's subreaper, but a stage may kill it."""
    if _STARTED.subreaper or sys.platform != "linux":
        return
    _STARTED.subreaper = True
    import ctypes  # only here: a few ms, and only a process that starts stages needs it

    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


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


@dataclass(frozen=True)
class _Stat:
    ppid: int
    session: int
    start_ticks: int
    state: str = "R"
    pgrp: int = 0


def _proc_stats() -> dict[int, _Stat]:
    """pid → (state, parent, group, session, start time) for every process /proc shows:
    the one reading of /proc/PID/stat the sweeps share."""
    table: dict[int, _Stat] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_bytes()
            fields = raw[raw.rfind(b")") + 2 :].split()
            table[int(entry)] = _Stat(
                int(fields[1]), int(fields[3]), int(fields[19]),
                state=fields[0].decode(), pgrp=int(fields[2]),
            )  # fmt: skip
        except (OSError, IndexError, ValueError):
            continue
    return table


def live_group_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies (a zombie is dead; on machines
    whose PID 1 does not reap, orphaned zombies linger and must not count as alive)."""
    return [
        pid
        for pid, stat in _proc_stats().items()
        if stat.state not in ("Z", "X") and stat.pgrp == pgid
    ]


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
        environ = _environ_of(int(entry), me)
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


def _environ_of(pid: int, me: int) -> bytes:
    """/proc/PID/environ. A child of ours caught inside execve shows an empty one: the
    kernel lets ``Popen`` return once the old image is gone, a moment before the new
    image's environment is in place. So ours are read again until it is (bounded)."""
    deadline = time.monotonic() + _EXEC_SETTLE_S
    while True:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return b""
        if environ or time.monotonic() >= deadline or _parent_of(pid) != me:
            return environ
        time.sleep(_KILL_POLL_S)


def _parent_of(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return int(raw[raw.rfind(")") + 2 :].split()[1])
    except (OSError, IndexError, ValueError):
        return None


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


def _open_log(log_path: Path) -> int:
    """The log for appending, readable by its owner only: a stage prints what it sees,
    and what it sees may be secret. An older, wider-open log keeps its content; only its
    mode narrows."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    return fd


def append_log_line(log_path: Path, text: str) -> None:
    """Append ``text`` to a log, creating it readable by its owner only."""
    fd = _open_log(log_path)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _new_mark() -> str:
    return f"{os.getpid()}-{time.monotonic_ns()}"


def _start(
    argv: tuple[str, ...],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: IO[bytes] | int,
    stdout: IO[bytes] | int,
    stderr: IO[bytes] | int,
    mark: str,
) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session (the child leads its own group), carrying a start mark.
    Our SIGINT/SIGTERM handler raises wherever the main thread is; when that is inside
    ``Popen`` after the exec, no handle ever reaches us, so the mark is how the child is
    found and killed before the interruption goes on. ``OSError`` (cannot start) is the
    caller's to report."""
    _become_subreaper()
    try:
        with _STARTED.lock:
            proc = subprocess.Popen(
                argv, cwd=cwd, env={**env, START_MARK: mark},
                stdin=stdin, stdout=stdout, stderr=stderr,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
            _STARTED.pids.add(proc.pid)
        return proc
    except OSError:
        raise
    except BaseException:
        kill_marked(START_MARK, mark)
        raise


def _waited(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` is reaped: its pid is no longer ours to keep from the orphan sweep."""
    _STARTED.pids.discard(proc.pid)


def pick_orphans(
    table: Mapping[int, _Stat], *, me: int, my_session: int, since: int, started: set[int]
) -> list[int]:
    """Our children that came from what we started, not from us: children of ``me`` that
    the runner did not start (``started``), in a session other than ours, started at or
    after ``since`` (the start time, in clock ticks, of the process whose end we sweep
    after). Everything the runner starts runs in a session of its own, and no process can
    move back into an older session, so whatever descends from it is in another one; a
    child forked here by other code (a multiprocessing or Celery pool) stays in ours, and
    a helper started in a session of its own before ``since`` is left alone."""
    return sorted(
        pid
        for pid, stat in table.items()
        if stat.ppid == me
        and stat.session != my_session
        and stat.start_ticks >= since
        and pid not in started
    )


def _subtrees(roots: list[int], table: Mapping[int, _Stat]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _own_children() -> set[int] | None:
    """This process's children, from each thread's ``children`` file (a few reads, where
    scanning /proc reads every process's stat); None where the kernel has no such file.
    A racing start is harmless: a child not yet registered sends us to the full scan,
    which holds the start lock."""
    found: set[int] = set()
    try:
        threads = os.listdir("/proc/self/task")
        for tid in threads:
            with open(f"/proc/self/task/{tid}/children", "rb") as listing:
                found.update(int(pid) for pid in listing.read().split())
    except FileNotFoundError:
        return None  # a thread that just ended, or no CONFIG_PROC_CHILDREN: scan
    except (OSError, ValueError):
        return None
    return found


def end_orphans(since: int | None) -> list[int]:
    """KILL every orphan handed to us (``pick_orphans``) with everything below it, and
    reap them, until none is left (bounded); the pids reaped. Their descendants are
    re-parented to us as they die, and are taken in the next round. Only ever a given
    pid is waited for, never "any child": a child started by other code (the fleet
    worker's threads, a pool) keeps its status for whoever waits for it."""
    if since is None or not os.path.isdir("/proc"):
        return []
    children = _own_children()
    if children is not None and children <= _STARTED.pids:
        return []  # nobody was handed to us: no need to read every process's stat
    me, my_session = os.getpid(), os.getsid(0)
    deadline = time.monotonic() + _KILL_SETTLE_S
    ended: list[int] = []
    while True:
        with _STARTED.lock:
            table = _proc_stats()
            orphans = pick_orphans(table, me=me, my_session=my_session, since=since,
                                   started=_STARTED.pids)  # fmt: skip
        if not orphans or time.monotonic() >= deadline:
            return ended
        for pid in _subtrees(orphans, table):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        reaped = False
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    ended.append(pid)
                    reaped = True
        if not reaped:  # KILLed, not dead yet: the kernel needs a moment
            time.sleep(_KILL_POLL_S)


class _Reports:
    """The reaper's messages on its stdout (a 4-byte length, then ``marshal`` of a plain
    dict): ``started`` once, then the final status. Only the reaper holds that pipe, so EOF
    means it is gone: no stage can keep it open."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.closed = False
        self.started: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None
        self.poller = select.poll()  # not select(): a busy process may hold fds past 1024
        self.poller.register(self.fd, select.POLLIN)

    def wait(self, timeout_s: float) -> None:
        """Read what arrives within ``timeout_s`` (returns at the first bytes or EOF)."""
        if self.closed:
            return
        if not self.poller.poll(max(0.0, timeout_s) * 1000):
            return
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.closed = True
                break
            self.buffer += chunk
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + size:
                break
            payload, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
            try:
                message = marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                continue
            if not isinstance(message, dict):
                continue
            if "started" in message:
                self.started = message
            else:
                self.final = message

    def wait_closed(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.closed and (remaining := deadline - time.monotonic()) > 0:
            self.wait(remaining)
        return self.closed


def _stop(reaper: subprocess.Popen[bytes], reports: _Reports, kill_after_s: float) -> None:
    """Ask the reaper to stop the stage (TERM to all of it, ``kill_after_s`` grace, KILL
    to what is left) and wait until it has; past a generous bound, KILL the reaper too
    (the caller's sweeps then find what it left)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(reaper.pid, signal.SIGTERM)
    if not reports.wait_closed(kill_after_s + _REAPER_SLACK_S):
        with contextlib.suppress(ProcessLookupError):
            os.kill(reaper.pid, signal.SIGKILL)


def _start_failure(
    argv: tuple[str, ...], cwd: Path, stdin_path: Path | None, error: Mapping[str, Any]
) -> tuple[int, str]:
    """The reaper's report of a stage that could not start, as exit code and message."""
    step, number = error.get("step"), int(error.get("errno") or 0)
    strerror = os.strerror(number) if number else "unknown error"
    if step == "cwd" and number == errno.ENOENT:
        return EXIT_NOT_FOUND, f"working directory not found: {cwd}"
    if step == "stdin":
        return EXIT_NOT_FOUND, f"cannot open standard input {stdin_path}: {strerror}"
    if step == "exec" and number == errno.ENOENT:
        return EXIT_NOT_FOUND, f"executable not found: {argv[0]}"
    if step == "exec" and number in (errno.EACCES, errno.EPERM):
        return EXIT_CANNOT_EXECUTE, f"cannot execute {argv[0]}: {strerror}"
    return EXIT_CANNOT_EXECUTE, f"cannot start {argv[0]}: {strerror} ({step})"


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
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
    shown: str | None = None,
    confine: Confinement | None = None,
) -> ProcessOutcome:
    """Run ``argv`` (no shell) to completion or timeout, output appended to ``log_path``.

    ``on_start`` is called once the group exists (persist it, to clean up after a crash);
    ``on_tick`` about every ``tick_s`` seconds with the elapsed time (for a progress line).
    ``stdin_path``: a file the process reads as its standard input (else /dev/null).
    ``cancel``: set from another thread to stop the process the way a timeout does
    (raises ``Cancelled`` once the group is gone).
    ``max_log_bytes``: what this run may add to the log on disk (head and tail kept, a
    marker line between them says how much was dropped); None: no cap.
    ``shown``: the header's command instead of ``argv`` (a sandbox shows what it runs).
    ``confine``: limits and a descriptor the stage's process gets before its exec.
    An exception raised while waiting (our own SIGINT/SIGTERM) terminates the group the
    same way a timeout does, then propagates.
    """
    if max_log_bytes is not None and max_log_bytes < MIN_LOG_BYTES:
        raise ValueError(f"max_log_bytes must be at least {MIN_LOG_BYTES}, not {max_log_bytes}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC)
    append_log_line(
        log_path,
        f"# orchestrator: {started_at.isoformat()} cwd={cwd}\n# $ {shown or shlex.join(argv)}\n",
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
        with contextlib.suppress(OSError):  # a full disk must not cost us the outcome
            append_log_line(log_path, note + "\n")
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

    mark = _new_mark()
    spec = {
        "argv": list(argv),
        "cwd": str(cwd),
        "env": {**env, START_MARK: mark},
        "stdin": str(stdin_path) if stdin_path is not None else None,
        "log": str(log_path),
        "max_log_bytes": max_log_bytes,
        "kill_after_s": kill_after_s,
        "parent": os.getpid(),
        "confine": None
        if confine is None
        else {
            "rlimits": [list(r) for r in confine.rlimits],
            "fd": confine.fd,
            "data": confine.data,
        },
    }
    log_fd = _open_log(log_path)
    try:
        # The reaper's own stderr is the log: if it ever fails, the reason is where the
        # stage's output would have been. It runs from "/" so that a missing working
        # directory is the stage's failure to report, not the reaper's.
        reaper = _start(
            (sys.executable, "-I", "-S", "-c", _REAPER_BOOT), cwd=Path("/"), env={},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd, mark=mark,
        )  # fmt: skip
    except OSError as exc:
        return finished(
            EXIT_CANNOT_EXECUTE, error=f"cannot start the stage's reaper: {exc.strerror}"
        )
    finally:
        os.close(log_fd)
    assert reaper.stdin is not None and reaper.stdout is not None
    since = process_start_ticks(reaper.pid)  # what descends from it started no earlier
    reports = _Reports(reaper.stdout)
    stage: int | None = None
    timed_out = False
    try:
        with contextlib.suppress(BrokenPipeError):  # it died at once: its exit says why
            reaper.stdin.write(marshal.dumps(spec))
        with contextlib.suppress(BrokenPipeError):
            reaper.stdin.close()
        deadline = t0 + timeout_s
        next_tick = t0 + tick_s
        while not reports.closed:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                _stop(reaper, reports, kill_after_s)
                break
            wake = min(deadline, next_tick if cancel is None else now + _CANCEL_POLL_S)
            reports.wait(min(wake, next_tick) - now)
            if stage is None and reports.started is not None:
                stage = int(reports.started["started"])
                ticks = reports.started.get("start_ticks")
                if on_start is not None:
                    on_start(ProcessIdentity(pgid=stage, start_ticks=ticks))
            if reports.closed:
                break
            if cancel is not None and cancel.is_set():
                raise Cancelled(argv)
            if time.monotonic() >= next_tick:
                next_tick += tick_s
                if on_tick is not None:
                    on_tick(time.monotonic() - t0)
    except BaseException:
        _stop(reaper, reports, kill_after_s)
        raise
    finally:
        returncode = _reaped(reaper)
        # Belts and braces behind the reaper: its stage group, then anything carrying
        # this start's mark (only when the reaper did not say it finished).
        if stage is not None:
            _kill_group(stage)
        if reports.final is None:
            kill_marked(START_MARK, mark)
            _remove_tail_segments(log_path, reaper.pid)  # a reaper that reported removed them
        # A reaper killed by its stage handed us what it held; marks can be cleared.
        end_orphans(since)
        reaper.stdout.close()

    final = reports.final
    if timed_out:
        return finished(EXIT_TIMEOUT, timed_out=True, pgid=stage)
    if final is None:
        sig = -returncode if returncode < 0 else None
        return finished(
            128 + sig if sig else returncode,
            sig=sig,
            pgid=stage,
            error=f"the stage's reaper ended without a report (status {returncode})",
        )
    if "error" in final:
        code, message = _start_failure(argv, cwd, stdin_path, final["error"])
        return finished(code, error=message)
    if "signal" in final:
        sig = int(final["signal"])
        return finished(128 + sig, sig=sig, pgid=stage)
    return finished(int(final["exit"]), pgid=stage)


def _reaped(reaper: subprocess.Popen[bytes]) -> int:
    """The reaper's exit status; KILLed if it outstays the bound. Once it has returned,
    whatever the reaper held is re-parented (the kernel does it before the exit is seen)."""
    try:
        returncode = reaper.wait(timeout=_REAPER_EXIT_S)
    except subprocess.TimeoutExpired:
        reaper.kill()
        returncode = reaper.wait()
    _waited(reaper)
    return returncode


def _remove_tail_segments(log_path: Path, reaper_pid: int) -> None:
    """A reaper that was KILLed leaves its tail segments behind: they go."""
    for leftover in log_path.parent.glob(f".{glob.escape(log_path.name)}.{reaper_pid}.tail-*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


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
            argv, cwd=cwd, env=env, mark=_new_mark(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError as exc:
        return CapturedHead(b"", False, None, error=f"cannot start {argv[0]}: {exc.strerror}")
    assert proc.stdout is not None
    since = process_start_ticks(proc.pid)
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
        _waited(proc)
        end_orphans(since)  # a descendant that left the group (a detached helper)
    data = b"".join(chunks)[:max_bytes]
    if timed_out:
        return CapturedHead(data, True, None, error=f"timed out after {timeout_s}s")
    if truncated:
        return CapturedHead(data, True, None)
    return CapturedHead(data, False, returncode)
