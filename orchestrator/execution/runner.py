"""The one place processes start.

Every stage, check and recipe command runs through ``run_process`` (one
``ProcessRequest`` in, one ``ProcessOutcome`` out: ``process.py``), by way of a small
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

Beside this module: ``reaper_protocol`` (the spec we send the reaper, the reports it sends
back), ``process_groups`` (finding and ending groups and orphans in /proc) and
``process_log`` (the log file itself). Only this module starts a process.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from orchestrator.execution.process import (
    EXIT_CANNOT_EXECUTE,
    EXIT_TIMEOUT,
    Cancelled,
    CapturedHead,
    HeadRequest,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.process_groups import (
    STARTED,
    become_subreaper,
    end_orphans,
    kill_group,
    kill_marked,
    kill_stale_group,
    process_start_ticks,
)
from orchestrator.execution.process_log import (
    append_log_line,
    open_log,
    redact_held,
    remove_tail_segments,
)
from orchestrator.execution.reaper_protocol import ReaperReports, reaper_spec, start_failure
from orchestrator.redaction import process_held

# The runner's two entry points, and what callers hand them and get back. The types and
# the group sweeps live beside it (``process``, ``process_groups``); these stay reachable
# here for the callers that have always named them through the runner.
__all__ = [
    "START_MARK",
    "CapturedHead",
    "ProcessIdentity",
    "ProcessOutcome",
    "ProcessRequest",
    "capture_head",
    "kill_marked",
    "kill_stale_group",
    "run_process",
]

# Every process we start carries a mark of its own in its environment: if our own
# SIGINT/SIGTERM lands while ``Popen`` is starting it (after exec, before ``Popen``
# returns), we have no handle on the child, and only the mark finds it.
START_MARK = "ORCH_PROCESS_MARK"

# How quickly a cancelled wait notices (a batch stopping its workers from another thread).
_CANCEL_POLL_S = 0.1
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
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session (the child leads its own group), carrying a start mark.
    Our SIGINT/SIGTERM handler raises wherever the main thread is; when that is inside
    ``Popen`` after the exec, no handle ever reaches us, so the mark is how the child is
    found and killed before the interruption goes on. ``OSError`` (cannot start) is the
    caller's to report."""
    become_subreaper()
    try:
        with STARTED.lock:
            proc = subprocess.Popen(
                argv, cwd=cwd, env={**env, START_MARK: mark},
                stdin=stdin, stdout=stdout, stderr=stderr,
                start_new_session=True, close_fds=True, pass_fds=pass_fds,
            )  # fmt: skip
            STARTED.pids.add(proc.pid)
        return proc
    except OSError:
        raise
    except BaseException:
        kill_marked(START_MARK, mark)
        raise


@dataclass
class _Supervised:
    """One stage under its reaper, as the wait learns about it: the sweeps after it need
    whatever was learnt, however the wait ended."""

    reaper: subprocess.Popen[bytes]
    reports: ReaperReports
    mark: str
    since: int | None  # the reaper's start: what descends from it started no earlier
    stage: int | None = None  # the stage's group, once the reaper has reported it
    timed_out: bool = False


@dataclass(frozen=True)
class _Ending:
    """How a run ended, before it is written in the log's footer."""

    exit_code: int
    timed_out: bool = False
    sig: int | None = None
    error: str | None = None
    pgid: int | None = None


def run_process(request: ProcessRequest) -> ProcessOutcome:
    """Run ``request.argv`` (no shell) to completion or timeout, output appended to its
    log (see ``ProcessRequest`` for every field).

    A cancel (``request.cancel`` set) raises ``Cancelled`` once the group is gone. An
    exception raised while waiting (our own SIGINT/SIGTERM) terminates the group the
    same way a timeout does, then propagates.
    """
    request.log_path.parent.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC)
    append_log_line(request.log_path, _header(request, started_at))
    t0 = time.monotonic()
    mark = _new_mark()
    try:
        reaper = _start_reaper(request.log_path, mark, tuple(ours for ours, _ in request.inherit))
    except OSError as exc:
        ending = _Ending(
            EXIT_CANNOT_EXECUTE, error=f"cannot start the stage's reaper: {exc.strerror}"
        )
        return _finished(request, started_at, t0, ending)
    assert reaper.stdin is not None and reaper.stdout is not None
    run = _Supervised(reaper, ReaperReports(reaper.stdout), mark, process_start_ticks(reaper.pid))
    try:
        marked = {**request.env, START_MARK: mark}
        _hand_over(reaper.stdin, reaper_spec(request, marked, os.getpid()))
        _supervise(request, run, t0)
    except BaseException:
        _stop(reaper, run.reports, request.kill_after_s)
        raise
    finally:
        returncode = _reaped(reaper)
        _sweep(request, run)
    return _finished(request, started_at, t0, _ending(request, run, returncode))


def _header(request: ProcessRequest, started_at: datetime) -> str:
    command = request.shown or shlex.join(request.argv)
    return f"# orchestrator: {started_at.isoformat()} cwd={request.cwd}\n# $ {command}\n"


def _start_reaper(
    log_path: Path, mark: str, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    """The stage's reaper, its spec still to be written on its stdin. Its own stderr is
    the log: if it ever fails, the reason is where the stage's output would have been.
    It runs from "/" so that a missing working directory is the stage's failure to
    report, not the reaper's. ``pass_fds``: what the stage inherits (the reaper hands
    them on)."""
    log_fd = open_log(log_path)
    try:
        return _start(
            (sys.executable, "-I", "-S", "-c", _REAPER_BOOT), cwd=Path("/"), env={},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd, mark=mark,
            pass_fds=pass_fds,
        )  # fmt: skip
    finally:
        os.close(log_fd)


def _hand_over(stdin: IO[bytes], spec: bytes) -> None:
    """Write the spec and close the pipe; a reaper that died at once leaves it broken,
    and its exit says why."""
    with contextlib.suppress(BrokenPipeError):
        stdin.write(spec)
    with contextlib.suppress(BrokenPipeError):
        stdin.close()


def _supervise(request: ProcessRequest, run: _Supervised, t0: float) -> None:
    """Wait for the reaper's reports until it is gone: pass on the stage's start, tick,
    stop it at the deadline (``run.timed_out``), raise ``Cancelled`` on a cancel."""
    reports, cancel = run.reports, request.cancel
    deadline = t0 + request.timeout_s
    next_tick = t0 + request.tick_s
    while not reports.closed:
        now = time.monotonic()
        if now >= deadline:
            run.timed_out = True
            _stop(run.reaper, reports, request.kill_after_s)
            return
        wake = min(deadline, next_tick if cancel is None else now + _CANCEL_POLL_S)
        reports.wait(min(wake, next_tick) - now)
        if run.stage is None and reports.started is not None:
            _note_started(request, run, reports.started)
        if reports.closed:
            return
        if cancel is not None and cancel.is_set():
            raise Cancelled(request.argv)
        if time.monotonic() >= next_tick:
            next_tick += request.tick_s
            if request.on_tick is not None:
                request.on_tick(time.monotonic() - t0)


def _note_started(request: ProcessRequest, run: _Supervised, report: Mapping[str, Any]) -> None:
    run.stage = int(report["started"])
    if request.on_start is not None:
        request.on_start(ProcessIdentity(pgid=run.stage, start_ticks=report.get("start_ticks")))


def _stop(reaper: subprocess.Popen[bytes], reports: ReaperReports, kill_after_s: float) -> None:
    """Ask the reaper to stop the stage (TERM to all of it, ``kill_after_s`` grace, KILL
    to what is left) and wait until it has; past a generous bound, KILL the reaper too
    (the caller's sweeps then find what it left)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(reaper.pid, signal.SIGTERM)
    if not reports.wait_closed(kill_after_s + _REAPER_SLACK_S):
        with contextlib.suppress(ProcessLookupError):
            os.kill(reaper.pid, signal.SIGKILL)


def _reaped(reaper: subprocess.Popen[bytes]) -> int:
    """The reaper's exit status; KILLed if it outstays the bound. Once it has returned,
    whatever the reaper held is re-parented (the kernel does it before the exit is seen)."""
    try:
        returncode = reaper.wait(timeout=_REAPER_EXIT_S)
    except subprocess.TimeoutExpired:
        reaper.kill()
        returncode = reaper.wait()
    STARTED.forget(reaper.pid)
    return returncode


def _sweep(request: ProcessRequest, run: _Supervised) -> None:
    """Belts and braces behind the reaper: its stage group, then anything carrying this
    start's mark (only when the reaper did not say it finished)."""
    if run.stage is not None:
        kill_group(run.stage)
    if run.reports.final is None:
        kill_marked(START_MARK, run.mark)
        # A reaper that reported removed them itself.
        remove_tail_segments(request.log_path, run.reaper.pid)
    # A reaper killed by its stage handed us what it held; marks can be cleared.
    end_orphans(run.since)
    assert run.reaper.stdout is not None
    run.reaper.stdout.close()


def _ending(request: ProcessRequest, run: _Supervised, returncode: int) -> _Ending:
    """What the reaper's final report (or its silence, or our timeout) says happened."""
    final = run.reports.final
    if run.timed_out:
        return _Ending(EXIT_TIMEOUT, timed_out=True, pgid=run.stage)
    if final is None:
        sig = -returncode if returncode < 0 else None
        return _Ending(
            128 + sig if sig else returncode,
            sig=sig,
            pgid=run.stage,
            error=f"the stage's reaper ended without a report (status {returncode})",
        )
    if "error" in final:
        code, message = start_failure(request, final["error"])
        return _Ending(code, error=message)
    if "signal" in final:
        sig = int(final["signal"])
        return _Ending(128 + sig, sig=sig, pgid=run.stage)
    return _Ending(int(final["exit"]), pgid=run.stage)


def _finished(
    request: ProcessRequest, started_at: datetime, t0: float, ending: _Ending
) -> ProcessOutcome:
    """The log's footer line, and the outcome."""
    duration = time.monotonic() - t0
    note = f"# orchestrator: exit {ending.exit_code} after {duration:.3f}s"
    note += " (timed out)" if ending.timed_out else ""
    note += f" (signal {ending.sig})" if ending.sig else ""
    note += f" ({ending.error})" if ending.error else ""
    with contextlib.suppress(OSError):  # a full disk must not cost us the outcome
        append_log_line(request.log_path, note + "\n")
    with contextlib.suppress(OSError):
        # The log stays in the run dir: no secret this process holds stays in it.
        redact_held(request.log_path, process_held())
    return ProcessOutcome(
        argv=request.argv,
        exit_code=ending.exit_code,
        timed_out=ending.timed_out,
        signal=ending.sig,
        started_at=started_at,
        ended_at=datetime.now(UTC),
        duration_s=duration,
        log_path=request.log_path,
        error=ending.error,
        pgid=ending.pgid,
    )


def capture_head(request: HeadRequest) -> CapturedHead:
    """Read at most ``max_bytes`` of a command's stdout, then stop it (whole group, KILL).

    For bounded reads of unbounded output (``git diff`` of a huge change): the cost is
    the cap, not the output. stderr is discarded. The group is always swept on return.
    """
    argv, max_bytes, timeout_s = request.argv, request.max_bytes, request.timeout_s
    try:
        proc = _start(
            argv, cwd=request.cwd, env=request.env, mark=_new_mark(),
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
        kill_group(proc.pid)
        proc.stdout.close()
        returncode = proc.wait()
        STARTED.forget(proc.pid)
        end_orphans(since)  # a descendant that left the group (a detached helper)
    data = b"".join(chunks)[:max_bytes]
    if timed_out:
        return CapturedHead(data, True, None, error=f"timed out after {timeout_s}s")
    if truncated:
        return CapturedHead(data, True, None)
    return CapturedHead(data, False, returncode)
