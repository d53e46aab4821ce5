"""The runner's other half: one small supervisor per started stage, run by path as
``python -I -S reaper.py`` so it imports nothing of ours and starts in a few milliseconds.

It exists because a process group is not enough to find what a stage started: a
descendant that calls ``setsid``, double-forks and clears its environment leaves the
group, loses its parent and drops any marker. As a *child subreaper* (Linux), every such
orphan is re-parented to us instead of to PID 1, so "every descendant of the stage" is
exactly our subtree in /proc, and it ends with us:

  * the stage runs in its own session (it leads its group), its stdout and stderr a pipe
    only we read;
  * when the stage's main process exits (any status), or when we are told to stop (TERM,
    INT or HUP from the runner on timeout, interruption or cancel; TERM from the kernel
    when the thread that started us dies, even by SIGKILL), every remaining descendant is
    KILLed and reaped; a stop first TERMs them all and waits up to ``kill_after_s``
    (a sandbox's wrapper and its init excepted: ``terminate``);
  * the log is written here, capped: the head is kept, then the tail in a few rotating
    segment files next to the log, so disk use stays under the cap and memory stays flat
    however much the stage prints; at the end head + a marker line + tail are assembled;
  * orphans that die are reaped as they go (SIGCHLD), so none lingers as a zombie.

The runner talks to us over our stdin (one JSON spec, then EOF) and stdout (JSON lines:
``started`` once the stage runs, then exactly one of ``exit``, ``signal`` or ``error``).
A stage that is only a wrapper (a sandbox: bwrap turns a command's death by signal N into
an exit 128+N) may be handed a pipe (``status_fd``) on which its first process reports
the command's raw wait status: ``signal`` N is then reported where the stage's exit is
128+N and that status says N (``inner_signal``).
Only we hold those pipes; the stage never sees them, so nothing it leaves behind can make
the runner's read hang. Without /proc or prctl (not Linux) the stage's group is all we
can find; the runner's own sweeps still run.
"""

from __future__ import annotations

# Only what Python has built in or loads in a millisecond: this runs once per stage, and
# ``json``, ``subprocess``, ``signal`` or ``typing`` would triple its start-up.
import _ctypes  # ``ctypes`` without its module of wrappers: a third of our start-up
import _signal  # type: ignore[import-not-found]  # ``signal`` without its enum wrappers
import errno
import marshal
import posix  # ``os`` without its Python layer, which costs a tenth of our start-up
import resource
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_SEEK_END = 2
_DEVNULL = "/dev/null"
_DEFAULT_PATH = "/bin:/usr/bin"  # os.defpath, for an environment without PATH
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
F_SETPIPE_SZ = 1031  # fcntl(2); not worth importing fcntl for

SIGTERM: int = _signal.SIGTERM
SIGINT: int = _signal.SIGINT
SIGHUP: int = _signal.SIGHUP
SIGKILL: int = _signal.SIGKILL
_STOP_SIGNALS = (SIGTERM, SIGINT, SIGHUP)
_PIPE_BYTES = 1 << 20  # as large as an unprivileged process may ask for by default
_CHUNK = 1 << 20
# Chunks moved per wake-up before we look at signals again: a flood must not starve a stop.
_CHUNKS_PER_TURN = 64
_REAP_EVERY_S = 1.0  # also woken by SIGCHLD; this bounds a missed one
_GRACE_POLL_S = 0.02
_KILL_SETTLE_S = 10.0
_KILL_POLL_S = 0.002
# Once every descendant is dead the pipe is at EOF; a writer outside our subtree (a
# process that was handed the fd) must not keep us here for ever.
_DRAIN_S = 5.0
# The tail is kept in this many full segments plus the one being written; one segment is
# the extra disk the final assembly needs, so the cap holds at every moment.
_SEGMENTS = 8


def _libc_function(name: str) -> int | None:
    """The address of a C library function, None without one (then the process group
    is all we can find)."""
    try:
        return int(_ctypes.dlsym(_ctypes.dlopen(None), name))  # type: ignore[arg-type]
    except (AttributeError, OSError):
        return None


_PRCTL = _libc_function("prctl")
_FCNTL = _libc_function("fcntl")


def _prctl(option: int, value: int) -> bool:
    if _PRCTL is None:
        return False
    return int(_ctypes.call_function(_PRCTL, (option, value, 0, 0, 0))) == 0


def report(message: dict[str, Any]) -> None:
    """One message to the runner: a 4-byte length, then ``marshal`` of a plain dict."""
    payload = marshal.dumps(message)
    try:
        posix.write(1, len(payload).to_bytes(4, "big") + payload)
    except OSError:  # the runner died: our cleanup still matters
        pass


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := posix.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _quietly(action: Any, *args: Any) -> None:
    try:
        action(*args)
    except OSError:
        pass


# --------------------------------------------------------------------------- descendants


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state letter) for every process /proc shows."""
    table: dict[int, tuple[int, str]] = {}
    try:
        entries = posix.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                raw = stat.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def live_descendants(root: int) -> list[int]:
    """Every non-zombie process below ``root``. Orphans of the subtree are re-parented to
    ``root`` (the subreaper), so the parent links reach all of them."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        if table[pid][1] not in ("Z", "X"):
            found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _signal_all(pids: list[int], pgid: int, signum: int) -> None:
    _quietly(posix.killpg, pgid, signum)
    for pid in pids:
        _quietly(posix.kill, pid, signum)


def _nspid(pid: int) -> list[int] | None:
    """``pid`` as each PID namespace sees it, from /proc's own down to the process's
    (``NSpid`` in /proc/PID/status, Linux 4.1 on); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"NSpid:"):
                    return [int(n) for n in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return None


def inside_namespace(me: int, pids: list[int]) -> list[int] | None:
    """Those of ``pids`` in a PID namespace below ours, but the sandbox's init (PID 1 of
    the namespace just below): the command and everything it started, however it left
    its group or its parent (an orphan inside is re-parented to that init, which is
    ours). None where the kernel does not say (then there is no telling)."""
    mine = _nspid(me)
    if not mine:
        return None
    depth = len(mine)
    inside = []
    for pid in pids:
        levels = _nspid(pid)
        if levels is None or len(levels) <= depth:
            continue  # gone, or outside (the wrapper)
        if len(levels) == depth + 1 and levels[-1] == 1:
            continue  # the sandbox's init: it ends when the command does
        inside.append(pid)
    return inside


def terminate(me: int, stage: int, wraps_pid_namespace: bool) -> None:
    """A stop's TERM, the start of its grace: to the stage's group and every process
    below us, one by one. A stage that wraps its command in a PID namespace (bwrap) is
    spared, and so is the namespace's init: the wrapper's death kills that init (bwrap's
    ``--die-with-parent``), and the kernel then KILLs everything inside at once, so the
    command would get no grace. Only the processes inside get TERM then; the KILL at the
    grace's end (``kill_everything``) reaches all, the wrapper first. Without NSpid
    (Linux before 4.1) everything gets TERM, as for any stage."""
    pids = live_descendants(me)
    inside = inside_namespace(me, pids) if wraps_pid_namespace else None
    if inside is None:
        _signal_all(pids, stage, SIGTERM)
        return
    for pid in inside:
        _quietly(posix.kill, pid, SIGTERM)


class Children:
    """Reaps every child (the stage and the orphans handed to us), remembering the stage's
    status."""

    def __init__(self, stage: int) -> None:
        self.stage = stage
        self.stage_status: int | None = None

    def reap(self) -> bool:
        """Reap whatever has exited; False once we have no child left."""
        while True:
            try:
                pid, status = posix.waitpid(-1, posix.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.stage:
                self.stage_status = status


def kill_everything(me: int, stage_pgid: int, children: Children) -> None:
    """KILL every descendant until none is alive (new ones forked meanwhile included),
    then reap them all; bounded. With no child left there is no descendant anywhere (an
    orphan is re-parented to us the moment its parent dies), so the usual end, a stage
    that left nothing behind, costs no look at /proc."""
    deadline = time.monotonic() + _KILL_SETTLE_S
    _quietly(posix.killpg, stage_pgid, SIGKILL)
    while children.reap() and time.monotonic() < deadline:
        _signal_all(live_descendants(me), stage_pgid, SIGKILL)
        time.sleep(_KILL_POLL_S)


# --------------------------------------------------------------------------- the log


class CappedLog:
    """The stage's output, written into the log with at most ``cap`` bytes on disk: the
    first half as the head, then the tail in rotating segment files; ``finish`` appends
    a marker with the exact number of bytes dropped, then the tail. ``cap=None``: all."""

    def __init__(self, fd: int, path: str, cap: int | None) -> None:
        self.fd = fd
        self.path = path
        self.cap = cap
        self.head_left: int | None = None if cap is None else cap // 2
        self.segment_size = 1 if cap is None else max(1, (cap - cap // 2) // (_SEGMENTS + 1))
        self.segments: list[tuple[str, int]] = []  # (path, size), oldest first
        self.segment_fd = -1
        self.dropped = 0
        self.head_end = posix.lseek(fd, 0, _SEEK_END)
        self.splice = hasattr(posix, "splice")
        self.serial = 0
        self.failed: str | None = None

    def take(self, src: int) -> int:
        """Move up to one chunk from the (non-blocking) pipe ``src``; 0 at EOF;
        ``BlockingIOError`` when it is empty for now. A log that cannot be written (a full
        disk, a file size limit) must not stop the stage: from then on output is read and
        dropped, and the marker says why."""
        if self.failed is None:
            try:
                return self._keep(src)
            except BlockingIOError:
                raise
            except OSError as exc:
                self.failed = exc.strerror or str(exc)
        dropped = len(posix.read(src, _CHUNK))
        self.dropped += dropped
        return dropped

    def _keep(self, src: int) -> int:
        if self.head_left is None or self.head_left > 0:
            want = _CHUNK if self.head_left is None else min(_CHUNK, self.head_left)
            moved = self._move(src, self.fd, want)
            if self.head_left is not None:
                self.head_left -= moved
            self.head_end += moved
            return moved
        path, used = self.segments[-1] if self.segment_fd >= 0 else ("", self.segment_size)
        if used >= self.segment_size:
            self._next_segment()
            path, used = self.segments[-1]
        moved = self._move(src, self.segment_fd, min(_CHUNK, self.segment_size - used))
        self.segments[-1] = (path, used + moved)
        return moved

    def _move(self, src: int, dst: int, count: int) -> int:
        if self.splice:
            try:
                return posix.splice(src, dst, count, flags=posix.SPLICE_F_NONBLOCK)
            except BlockingIOError:
                raise
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                self.splice = False  # a file system that cannot splice: copy instead
        data = posix.read(src, count)
        view = memoryview(data)
        while view:
            view = view[posix.write(dst, view) :]
        return len(data)

    def _next_segment(self) -> None:
        if self.segment_fd >= 0:
            posix.close(self.segment_fd)
        if len(self.segments) >= _SEGMENTS:
            oldest, size = self.segments.pop(0)
            posix.unlink(oldest)
            self.dropped += size
        self.serial += 1
        directory, slash, name = self.path.rpartition("/")
        path = f"{directory}{slash}.{name}.{posix.getpid()}.tail-{self.serial}"
        flags = posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC | posix.O_CLOEXEC
        self.segment_fd = posix.open(path, flags, 0o600)
        self.segments.append((path, 0))

    def finish(self) -> None:
        if self.segment_fd >= 0:
            posix.close(self.segment_fd)
            self.segment_fd = -1
        if self.dropped:
            last = posix.pread(self.fd, 1, self.head_end - 1) if self.head_end else b"\n"
            why = (
                f"the log could not be written: {self.failed}"
                if self.failed is not None
                else f"log capped at {self.cap} bytes: head and tail kept"
            )
            marker = f"# orchestrator: {self.dropped} bytes of output dropped here ({why})\n"
            _quietly(posix.write, self.fd, (b"" if last == b"\n" else b"\n") + marker.encode())
        for path, size in self.segments:
            try:
                with open(path, "rb") as segment:
                    _copy(segment.fileno(), self.fd, size)
            except OSError:  # a full disk: the tail is lost, the stage's status is not
                pass
            posix.unlink(path)  # before the next one is copied: the cap holds throughout
        self.segments = []


def _copy(src: int, dst: int, size: int) -> None:
    """``size`` bytes from the start of file ``src`` to ``dst``'s position: in the kernel
    where it can (Linux sends file to file), else through a buffer."""
    copied = 0
    while copied < size:
        try:
            sent = posix.sendfile(dst, src, copied, size - copied)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP):
                raise
            break  # this system sends only to sockets
        if sent == 0:
            return
        copied += sent
    while copied < size:
        chunk = posix.pread(src, min(_CHUNK, size - copied), copied)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[posix.write(dst, view) :]
        copied += len(chunk)


def pump(src: int, log: CappedLog) -> bool:
    """Move what the pipe holds now into the log; False at EOF."""
    for _ in range(_CHUNKS_PER_TURN):
        try:
            if log.take(src) == 0:
                return False
        except BlockingIOError:
            return True
    return True


def drain(src: int, log: CappedLog) -> None:
    """Everything left in the pipe once its writers are dead, bounded in time."""
    deadline = time.monotonic() + _DRAIN_S
    poller = select.poll()
    poller.register(src, select.POLLIN)
    while (remaining := deadline - time.monotonic()) > 0:
        if poller.poll(remaining * 1000) and not pump(src, log):
            return


# --------------------------------------------------------------------------- main


def _exec_on_path(argv: list[str], env: dict[str, str]) -> None:
    """``os.execvpe(argv[0], argv, env)``: a name holding a slash is run as it is, any
    other is looked for along ``env``'s PATH (an empty entry is the working directory).
    Raises what the search met: the first error that is not "no such file" (a program
    found but not executable says more), else the last."""
    name = argv[0]
    if "/" in name:
        posix.execve(name, argv, env)
    saved: OSError | None = None
    last: OSError | None = None
    for directory in env.get("PATH", _DEFAULT_PATH).split(":"):
        try:
            posix.execve(f"{directory}/{name}" if directory else name, argv, env)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            last = exc
            saved = saved or exc
    raise saved or last or FileNotFoundError(2, "No such file or directory", name)


def _confine(confine: dict[str, Any] | None) -> None:  # pragma: no cover - in the child
    """The runner's ``Confinement``: limits, then its data on its descriptor (a pipe
    written in full before the exec: a seccomp program is a few hundred bytes)."""
    if not confine:
        return
    for which, wanted in confine["rlimits"]:
        _soft, hard = resource.getrlimit(which)
        value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(which, (value, value))
    if confine["data"]:
        read_end, write_end = posix.pipe()
        posix.write(write_end, confine["data"])
        posix.close(write_end)
        posix.dup2(read_end, confine["fd"])  # inheritable: the program reads it
        posix.close(read_end)


def _inherit(pairs: Any) -> None:  # pragma: no cover - in the child
    """The descriptors the runner handed us for the stage, each at the number it
    asked for (``dup2`` clears close-on-exec there); the original closed."""
    targets = {target for _, target in pairs}
    placed = []
    for given, target in pairs:
        # One of ours on another's number would be overwritten before it is placed.
        ours = given
        while ours in targets and ours != target:
            ours = posix.dup(ours)
        placed.append((ours, target))
    for ours, target in placed:
        if ours != target:
            posix.dup2(ours, target)
    for ours, _ in placed:
        if ours not in targets:
            posix.close(ours)


def _drop_inherited(spec: dict[str, Any]) -> None:
    """Ours once the stage has its copies: a channel whose every end is gone is how
    the other side learns the stage is."""
    for ours, _ in spec.get("inherit") or ():
        _quietly(posix.close, ours)


def start_stage(spec: dict[str, Any], stdin: int, output: int) -> int | dict[str, Any]:
    """Fork and exec the stage in a session of its own, stdin and output in place: its
    pid, or what could not be done (``step``: cwd or exec, and the errno). The child
    side dies with us (PDEATHSIG), so a stage never outlives its reaper."""
    argv, env = spec["argv"], spec["env"]
    me = posix.getpid()
    failed_read, failed_write = posix.pipe()  # close-on-exec: EOF is a successful exec
    pid = posix.fork()
    if pid == 0:  # pragma: no cover - the child's side of fork, ends in exec or _exit
        step = "setup"
        try:
            posix.close(failed_read)
            posix.setsid()
            _prctl(PR_SET_PDEATHSIG, SIGKILL)
            if posix.getppid() != me:  # we died before that line: nobody would reap it
                posix.kill(posix.getpid(), SIGKILL)
            _signal.set_wakeup_fd(-1)
            # Python ignores these; a program we start must find them as the system has them.
            for ignored in (_signal.SIGPIPE, _signal.SIGXFSZ):
                _signal.signal(ignored, _signal.SIG_DFL)
            posix.dup2(stdin, 0)
            posix.dup2(output, 1)
            posix.dup2(output, 2)
            step = "confine"
            _inherit(spec.get("inherit") or ())
            _confine(spec.get("confine"))
            step = "cwd"
            posix.chdir(spec["cwd"])
            step = "exec"
            _exec_on_path(argv, env)
        except OSError as exc:
            posix.write(failed_write, marshal.dumps({"step": step, "errno": exc.errno or 0}))
        finally:
            posix._exit(127)
    posix.close(failed_write)
    failure = _read_all(failed_read)
    posix.close(failed_read)
    if failure:
        posix.waitpid(pid, 0)
        return dict(marshal.loads(failure))
    return pid


class StatusChannel:
    """The pipe on which the stage's own first process (the sandbox's PID 1) reports the
    raw wait status of the command it ran: the stage gets its write end at
    ``spec["status_fd"]``; none without that key."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.read_end = self.write_end = -1
        target = spec.get("status_fd")
        if target is None:
            return
        self.read_end, self.write_end = posix.pipe()
        posix.set_blocking(self.read_end, False)
        self.spec = {**spec, "inherit": [*(spec.get("inherit") or ()), [self.write_end, target]]}

    def started(self) -> None:
        """Ours closed once the stage holds its copy: only the stage can write now."""
        if self.write_end >= 0:
            posix.close(self.write_end)
            self.write_end = -1

    def read(self) -> int | None:
        """The status reported, once every writer is dead; None if none (or not a
        status)."""
        if self.read_end < 0:
            return None
        try:
            said = posix.read(self.read_end, 64)
        except OSError:
            said = b""
        posix.close(self.read_end)
        self.read_end = -1
        try:
            status = int(said.strip() or b"-1")
        except ValueError:
            return None
        return status if 0 <= status <= 0xFFFF else None


def inner_signal(code: int, inner: int | None) -> int | None:
    """The signal that killed the command inside, when the stage's own exit ``code`` is
    what its first process made of it: 128+N for a command killed by N. A report that
    does not agree with the exit is ignored (a command could write one itself: then it
    could claim only what killing itself with N would have said), and so is one where
    the stage itself was killed (its own signal is the news then)."""
    if inner is None or code <= 128 or not posix.WIFSIGNALED(inner):
        return None
    signum = posix.WTERMSIG(inner)
    return signum if code == 128 + signum else None


def supervise(spec: dict[str, Any], wake: int) -> int:
    me = posix.getpid()
    read_end, write_end = posix.pipe()
    if _FCNTL is not None:  # a larger pipe means fewer wake-ups; a smaller one only costs more
        _ctypes.call_function(_FCNTL, (read_end, F_SETPIPE_SZ, _PIPE_BYTES))
    posix.set_blocking(read_end, False)
    log_fd = posix.open(spec["log"], posix.O_RDWR | posix.O_CREAT | posix.O_CLOEXEC, 0o600)
    log = CappedLog(log_fd, spec["log"], spec["max_log_bytes"])
    try:
        stdin = posix.open(spec["stdin"] or _DEVNULL, posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError as exc:
        report({"error": {"step": "stdin", "errno": exc.errno or 0}})
        return 0
    status = StatusChannel(spec)
    started = start_stage(status.spec, stdin, write_end)
    _drop_inherited(spec)
    status.started()
    posix.close(write_end)
    posix.close(stdin)
    if isinstance(started, dict):
        report({"error": started})
        return 0
    stage = started
    report({"started": stage, "start_ticks": _start_ticks(stage)})

    children = Children(stage)
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    poller.register(wake, select.POLLIN)
    pipe_open = True
    stop_by: float | None = None
    while True:
        children.reap()
        now = time.monotonic()
        if stop_by is None:
            if children.stage_status is not None:
                break  # the stage is over: whatever it left goes now
            timeout = _REAP_EVERY_S
        else:
            if (
                now >= stop_by
                or not children.reap()
                or (children.stage_status is not None and not live_descendants(me))
            ):
                break
            timeout = min(_GRACE_POLL_S, stop_by - now)
        for fd, _ in poller.poll(timeout * 1000):
            if fd == read_end and pipe_open and not pump(read_end, log):
                pipe_open = False
                poller.unregister(read_end)
            elif fd == wake:
                received = posix.read(wake, 4096)
                if stop_by is None and any(s in received for s in _STOP_SIGNALS):
                    stop_by = time.monotonic() + float(spec["kill_after_s"])
                    terminate(me, stage, bool(spec.get("wraps_pid_namespace")))
    kill_everything(me, stage, children)
    if pipe_open:
        drain(read_end, log)
    log.finish()
    posix.close(log_fd)
    inner = status.read()
    if children.stage_status is None:  # unkillable (uninterruptible sleep) past the bound
        report({"signal": SIGKILL, "lost": True})
        return -SIGKILL
    code = posix.waitstatus_to_exitcode(children.stage_status)
    signum = inner_signal(code, inner)
    if signum is not None:
        code = -signum
    report({"signal": -code} if code < 0 else {"exit": code})
    return code


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            raw = stat.read()
        return int(raw[raw.rfind(b")") + 2 :].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _ignore(signum: int, frame: object) -> None:
    """The wake-up fd carries the news; a handler must exist for it to be written."""


def main() -> int:
    wake_read, wake_write = posix.pipe()
    for fd in (wake_read, wake_write):
        posix.set_blocking(fd, False)
    _signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for signum in (*_STOP_SIGNALS, _signal.SIGCHLD):
        _signal.signal(signum, _ignore)
    spec = marshal.loads(_read_all(0))
    posix.dup2(posix.open(_DEVNULL, posix.O_RDONLY), 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, SIGTERM)
    if posix.getppid() != spec["parent"]:  # the runner died before PDEATHSIG was armed
        report({"error": {"step": "runner gone", "errno": 0}})
        return 0
    code = supervise(spec, wake_read)
    if code < 0:
        # Die the way the stage died, so even a runner that reads only our status sees it.
        try:
            _signal.signal(-code, _signal.SIG_DFL)
        except (OSError, ValueError):  # KILL and STOP have no handler to reset
            pass
        _quietly(resource.setrlimit, resource.RLIMIT_CORE, (0, 0))  # no core file of ours
        posix.kill(posix.getpid(), -code)
        return 128 - code  # a signal that does not end a process by default
    return code


if __name__ == "__main__":
    # Nothing is left to flush or finalise (we write with posix.write): skip the teardown.
    posix._exit(main())
