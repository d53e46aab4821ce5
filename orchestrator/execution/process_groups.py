"""Process groups and orphans: finding them in /proc, and ending them.

What the runner leans on once a process has started (``runner.py`` starts them): KILL a
group and wait until nothing in it is alive; KILL whatever carries an environment mark,
wherever it went; end the orphans a killed supervisor handed to this process (it is a
child subreaper, so they come here, not to PID 1); and after a crash, KILL the group a
dead orchestrator left, only when its leader is the very process it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.execution.process import ProcessIdentity

# After KILL the kernel needs a moment to tear processes down; we wait (bounded) until
# none is left alive, so "nothing survives" holds the instant we return. The bound is
# generous: on a loaded two-core machine teardown of a group has taken over 2 s, and the
# wait ends the moment the group is gone, so a large bound costs nothing when all is well.
_KILL_SETTLE_S = 10.0
_KILL_POLL_S = 0.002
# How long a child of ours may take to finish its execve (see _environ_of).
_EXEC_SETTLE_S = 0.5
PR_SET_CHILD_SUBREAPER = 36


class StartedChildren:
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

    def forget(self, pid: int) -> None:
        """``pid`` is reaped: no longer ours to keep from the orphan sweep."""
        self.pids.discard(pid)


# The runner registers every child it starts here (holding ``lock``), and forgets it
# once it has waited for it.
STARTED = StartedChildren()
os.register_at_fork(after_in_child=STARTED.reset)


def become_subreaper() -> None:
    """Orphans below us come to us rather than to PID 1 (Linux), once per process: the
    reaper is the stage's subreaper, but a stage may kill it."""
    if STARTED.subreaper or sys.platform != "linux":
        return
    STARTED.subreaper = True
    import ctypes  # only here: a few ms, and only a process that starts stages needs it

    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


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


def kill_group(pgid: int) -> None:
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
    kill_group(identity.pgid)
    return True


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
    if children is not None and children <= STARTED.pids:
        return []  # nobody was handed to us: no need to read every process's stat
    me, my_session = os.getpid(), os.getsid(0)
    deadline = time.monotonic() + _KILL_SETTLE_S
    ended: list[int] = []
    while True:
        with STARTED.lock:
            table = _proc_stats()
            orphans = pick_orphans(table, me=me, my_session=my_session, since=since,
                                   started=STARTED.pids)  # fmt: skip
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
