"""The preflight's engine check (issue 42): each engine stage's program, where its attempt
will start it — inside that stage's sandbox, built by the run's own builder
(``execution.attempts.sandbox_spec`` and ``sandboxed``), not a copy of it.

Every preflight (``doctor``, and the one before ``run`` and ``batch``) looks the program up
on the PATH the sandbox gives it and asks the sandbox's own rule (``sandbox.shows``)
whether it sees every file starting it takes: the program, the file its links lead to
(npm's ``.bin/claude`` is a link into ``node_modules``) and a script's interpreter (its
``#!`` line). What is hidden is a failure naming the ``readable`` line that shows it.

``doctor`` then starts it there (``domain/preflight.probe_argv``: ``PROGRAM --version``; a
``command`` engine's program is looked up inside but not run), one sandbox start per
engine and sandbox setting, all at once on threads, each bounded by
``PROBE_TIMEOUT_S``. A run's preflight does not start it: a start costs up to seconds
(aider's imports) on every run, and the run itself says at once when it cannot start.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.domain.config import LoadedConfig, StageConfig
from orchestrator.domain.preflight import EngineFact, ProbeResult, probe_argv
from orchestrator.execution.executor import Executor
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.sandbox import BwrapLocator, sandbox_available, shows
from orchestrator.execution.stage_env import StageContext, stage_environ
from orchestrator.redaction import redact
from orchestrator.storage.layout import StateLayout

if TYPE_CHECKING:
    from orchestrator.engines import EngineTask
    from orchestrator.engines.base import Invocation
    from orchestrator.execution.attempts import SandboxHost

PROBE_TIMEOUT_S = 20.0
_SAID_CHARS = 300
_SHEBANG_BYTES = 256
# Too wide to suggest as a ``readable`` place: the root, the places the sandbox hides on
# purpose and the system's own, a home and what holds it, a home's shared dot-dirs.
_WIDE = frozenset(
    Path(p) for p in ("/", "/tmp", "/home", "/root", "/var", "/srv", "/mnt", "/media", "/run",
                      "/opt", "/usr", "/nix", "/nix/store")
)  # fmt: skip
_HOME_SHARED = frozenset((".local", ".config", ".cache"))
_BIN_DIRS = frozenset(("bin", ".bin", "sbin"))
_VERSION = re.compile(r"\b\d+\.\d+")


# Where the run's own directories will be: no command can be looked for under them yet.
_LATER = "/nonexistent/orchestrator-preflight"
_CLONE, _RUN = Path(f"{_LATER}-clone"), Path(f"{_LATER}-run-dir")


def stand_in_context(stage: str, engine: str = "") -> StageContext:
    """A run's context before the run: its directories are stand-ins that do not exist."""
    return StageContext(
        ticket_file=_RUN / "ticket.md", ticket_id="PREFLIGHT-1", ticket_kind="feature",
        repository="", base_branch="main", run_id="preflight", run_dir=_RUN,
        clone_dir=_CLONE, state_dir=Path(_LATER), stage=stage, engine=engine, model="",
        attempt=1,
    )  # fmt: skip


def locate_program(program: str, path: str) -> tuple[str | None, bool]:
    """(where ``program`` is, or None; whether it can only be looked for in the run)."""
    if program.startswith(_LATER):
        return None, True
    if "/" in program:
        if not os.path.isabs(program):
            return None, True  # relative to the clone or the run directory
        return (program if os.path.isfile(program) and os.access(program, os.X_OK) else None), False
    return shutil.which(program, path=path), False


def shown_program(program: str) -> str:
    """A program as written: the stand-ins for the run's directories mean nothing to anyone."""
    return program.replace(str(_CLONE), "{clone}").replace(str(_RUN), "{run_dir}")


@dataclass(frozen=True)
class Located:
    """An engine stage's program as its sandbox will see it (before any start)."""

    fact: EngineFact
    stage: StageConfig
    ctx: StageContext
    invocation: Invocation | None  # None: patch (nothing to start)


def _task(stage: StageConfig, loaded: LoadedConfig, ctx: StageContext) -> EngineTask:
    from orchestrator.engines import EngineTask

    engine = loaded.config.engines[stage.engine or ""]
    return EngineTask(
        ticket_id=ctx.ticket_id, title="preflight", kind=ctx.ticket_kind, body="",
        clone_dir=ctx.clone_dir, run_dir=ctx.run_dir,
        model=stage.model or (engine.models[0] if engine.models else ""),
        settings=engine.adapter_settings(), attempt=1,
    )  # fmt: skip


def _cwd(stage: StageConfig, ctx: StageContext) -> Path:
    return ctx.clone_dir if stage.cwd == "clone" else ctx.run_dir


def _environ(
    stage: StageConfig, loaded: LoadedConfig, ctx: StageContext, environ: Mapping[str, str],
    invocation: Invocation,
) -> dict[str, str]:  # fmt: skip
    """The engine's environment, as ``engine_stage.run_engine`` gives it."""
    engine = loaded.config.engines[stage.engine or ""]
    env = stage_environ(environ, ctx, (*stage.pass_env, *engine.pass_env))
    return {**env, **invocation.env}


def interpreter(script: Path, path_env: str) -> Path | None:
    """The interpreter a script's ``#!`` line names (``env NAME``: NAME on ``path_env``),
    or None (not a script, or nothing found)."""
    try:
        with script.open("rb") as fh:
            head = fh.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return Path(words[0])
    names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    found = shutil.which(names[0], path=path_env) if names else None
    return Path(found) if found else None


def needed_files(found: Path, path_env: str) -> list[tuple[Path, Path]]:
    """(a file, it with its links followed) for each file starting ``found`` takes: the
    program itself and its script's interpreter."""
    resolved = Path(os.path.realpath(found))
    pairs = [(found, resolved)]
    interp = interpreter(resolved, path_env)
    if interp is not None and interp.is_absolute():
        pairs.append((interp, Path(os.path.realpath(interp))))
    return pairs


def _too_wide(place: Path, home: Path | None) -> bool:
    if place in _WIDE:
        return True
    if home is not None:
        if home.is_relative_to(place):
            return True
        if place.parent == home and place.name in _HOME_SHARED:
            return True
    return False


def _lift(place: Path, home: Path | None) -> Path:
    """A ``bin`` directory's install is its parent (a venv, a prefix), unless too wide."""
    if place.name in _BIN_DIRS and not _too_wide(place.parent, home):
        return place.parent
    return place


def install_places(path: Path, resolved: Path, hidden: set[Path], home: Path | None) -> list[Path]:
    """Where to show ``path`` (and the file its links lead to) from: the install both lie
    in (``node_modules`` for npm's ``.bin`` links, a venv or prefix for ``bin/x``), or,
    where that would be too wide (a whole home, /tmp), each hidden one's own directory."""
    common = Path(os.path.commonpath([path, resolved]))
    if common in (path, resolved):
        common = common.parent
    if not _too_wide(common, home):
        return [_lift(common, home)]
    return [_lift(p.parent, home) for p in (path, resolved) if p in hidden]


def as_written(place: Path, home: Path | None) -> str:
    """A path as a config writes it: under the home, with ``~/``."""
    if home is not None and place.is_relative_to(home) and place != home:
        return f"~/{place.relative_to(home)}"
    return str(place)


def locate(
    loaded: LoadedConfig,
    host: SandboxHost | None,
    stage: StageConfig,
    ctx: StageContext,
    home: Path | None,
) -> Located:
    """The static part: where the program is, and what of it the sandbox hides (``host``:
    None only when no engine has a program, all being ``patch``)."""
    engine = loaded.config.engines[stage.engine or ""]
    where = f"engine {stage.engine} (stage {stage.name})"
    sandboxed_ = stage.sandbox != "none"
    fact = EngineFact(where, stage.name, engine.kind, "", sandboxed=sandboxed_,
                      declared=stage.readable)  # fmt: skip
    if engine.kind == "patch" or host is None:
        return Located(fact, stage, ctx, None)
    from orchestrator.domain.stage_hosts import egress_hosts
    from orchestrator.engines import adapter_for
    from orchestrator.execution.attempts import sandbox_spec

    invocation = adapter_for(engine.kind).invocation(_task(stage, loaded, ctx))
    program = invocation.argv[0]
    env = _environ(stage, loaded, ctx, host.environ, invocation)
    spec = None
    if sandboxed_:
        hosts = egress_hosts(stage, loaded.config, stage.engine or "", "", host.environ)
        spec = sandbox_spec(host, stage, cwd=_cwd(stage, ctx), ctx=ctx, role="engine",
                            egress_hosts=hosts)  # fmt: skip
        env = spec.environment(env)
    path_env = env.get("PATH", os.defpath)
    found, later = locate_program(program, path_env)
    fact = replace(fact, program=shown_program(program), later=later, found=found)
    if found is None or spec is None:
        return Located(fact, stage, ctx, invocation)
    pairs = needed_files(Path(os.path.abspath(found)), path_env)
    hidden = {p for pair in pairs for p in pair if not shows(spec, p)}
    places: list[str] = []
    for path, resolved in pairs:
        if path in hidden or resolved in hidden:
            places += [as_written(p, home) for p in install_places(path, resolved, hidden, home)]
    ordered = [p for pair in pairs for p in dict.fromkeys(pair) if p in hidden]
    fact = replace(
        fact,
        resolved=str(pairs[0][1]),
        hidden=tuple(str(p) for p in dict.fromkeys(ordered)),
        readable=tuple(dict.fromkeys(places)),
    )
    return Located(fact, stage, ctx, invocation)


def _said(log: Path, *, first: bool) -> str:
    """What the probe printed: its first line (a version), or its last words; the
    runner's own ``# `` lines left out, redacted, cut."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("# ")]
    if not lines:
        return ""
    # A version is the line that reads like one (Codex warns before it says its own).
    versions = [ln for ln in lines if _VERSION.search(ln)]
    said = (versions or lines)[0] if first else " / ".join(lines[-3:])
    said = redact(said)
    return said if len(said) <= _SAID_CHARS else said[: _SAID_CHARS - 1] + "…"


def probe(host: SandboxHost, located: Located, timeout_s: float = PROBE_TIMEOUT_S) -> EngineFact:
    """Start the program in the stage's sandbox (``probe_argv``), in stand-in directories
    of a run (a temporary clone and run dir), and say what it came to."""
    fact, stage, ctx = located.fact, located.stage, located.ctx
    argv = probe_argv(fact.kind, fact.program)
    if argv is None or located.invocation is None:
        return fact
    fact = replace(fact, argv=argv)
    from orchestrator.domain.stage_hosts import egress_hosts
    from orchestrator.execution.attempts import sandboxed

    if fact.sandboxed:
        problem = sandbox_available(host.executor, host.locate_bwrap)
        if problem is not None:
            return replace(fact, not_started="not started: the sandbox cannot start here")
    with tempfile.TemporaryDirectory(prefix="orch-doctor-") as scratch:
        layout = StateLayout(Path(scratch))  # a stand-in state dir, laid out as a run's
        run_dir, clone = layout.run_dir("preflight"), layout.clone_dir("preflight")
        clone.mkdir(parents=True)
        here = replace(ctx, run_dir=run_dir, clone_dir=clone, ticket_file=run_dir / "ticket.md",
                       state_dir=Path(scratch))  # fmt: skip
        loaded = host.loaded
        hosts = egress_hosts(stage, loaded.config, stage.engine or "", "", host.environ)
        executor = sandboxed(host, stage, cwd=_cwd(stage, here), ctx=here, role="engine",
                             egress_hosts=hosts)  # fmt: skip
        log = Path(scratch) / "probe.log"
        outcome = executor.run(
            ProcessRequest(
                argv, cwd=_cwd(stage, here), log_path=log, timeout_s=timeout_s,
                env=_environ(stage, loaded, here, host.environ, located.invocation),
                kill_after_s=2.0,
            )
        )  # fmt: skip
        said = _said(log, first=outcome.ok)
    if not outcome.ok and outcome.error and not said:
        said = redact(outcome.error)[:_SAID_CHARS]
    return replace(
        fact,
        probe=ProbeResult(
            ok=outcome.ok, said=said, exit_code=outcome.exit_code,
            timed_out=outcome.timed_out, timeout_s=timeout_s,
        ),
    )  # fmt: skip


def _same_start(stage: StageConfig) -> tuple[object, ...]:
    """Stages whose probe would start the same thing in the same sandbox."""
    return (stage.engine, stage.model, stage.cwd, stage.pass_env,
            stage.model_dump_json(include={"sandbox", "network", "writable", "readable", "egress"}))  # fmt: skip


class EngineProbes:
    """The engine checks of one preflight: ``locate`` each engine stage's program now;
    with ``start``, start each (once per engine and sandbox) on a thread of its own, so the
    wait is the slowest one's; ``facts`` waits for them."""

    def __init__(
        self,
        loaded: LoadedConfig,
        state_dir: Path,
        environ: Mapping[str, str],
        *,
        executor: Executor,
        locate_bwrap: BwrapLocator,
        start: bool,
        timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        stages = [stage for stage in loaded.config.stages if stage.engine is not None]
        host = None
        # All ``patch`` (the starter config): nothing to look for, nor to import for it.
        if any(loaded.config.engines[stage.engine or ""].kind != "patch" for stage in stages):
            from orchestrator.execution.attempts import SandboxHost

            host = SandboxHost(loaded, state_dir, environ, executor, locate_bwrap)
        home = Path(environ["HOME"]) if environ.get("HOME") else None
        self._located = [
            locate(loaded, host, stage, stand_in_context(stage.name, stage.engine or ""), home)
            for stage in stages
        ]  # fmt: skip
        self._started: dict[tuple[object, ...], Future[EngineFact]] = {}
        self._pool: ThreadPoolExecutor | None = None
        startable = [
            located for located in self._located
            if start and located.invocation is not None and located.fact.found is not None
            and not located.fact.hidden and not located.fact.later
        ]  # fmt: skip
        if startable and host is not None:
            self._pool = ThreadPoolExecutor(
                max_workers=min(4, len(startable)), thread_name_prefix="preflight-engine"
            )
            for located in startable:
                key = _same_start(located.stage)
                if key not in self._started:
                    self._started[key] = self._pool.submit(probe, host, located, timeout_s)

    def facts(self) -> list[EngineFact]:
        try:
            out = []
            for located in self._located:
                started = self._started.get(_same_start(located.stage))
                if started is None:
                    out.append(located.fact)
                    continue
                said = started.result()
                out.append(replace(said, where=located.fact.where, stage=located.fact.stage,
                                   declared=located.fact.declared))  # fmt: skip
            return out
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
