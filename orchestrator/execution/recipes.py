"""Running a mechanical-fix recipe: its argv lists (already vetted by ``plan_recipe``),
one after another in the clone, through the executor, stopping at the first that fails.

A recipe was written by a model, so by default each command runs in the sandbox: the
clone is the only writable path, no network, and an environment of a few named variables.
A machine that cannot start the sandbox refuses the recipe (fail closed)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.execution.executor import Executor
from orchestrator.execution.process import DEFAULT_MAX_LOG_BYTES, ProcessRequest
from orchestrator.execution.sandbox import (
    HIDDEN_ALWAYS,
    REMEDY,
    BwrapLocator,
    SandboxedExecutor,
    SandboxSpec,
    bundled_bwrap,
)

# All a recipe command is told: git needs PATH (and HOME, set inside the sandbox); the
# ORCH_* pair names the clone and marks the process as this attempt's. GIT_* and PAGER
# carry the hardening and the commit identity the orchestrator gives git (the caller's
# environment has already lost any GIT_* of its own).
RECIPE_ENV = ("PATH", "LANG", "PAGER", "ORCH_CLONE_DIR", "ORCH_ATTEMPT_ID")
RECIPE_ENV_PREFIXES = ("GIT_",)

RecipeSandbox = Literal["bwrap", "none"]


def recipe_spec(
    clone: Path, hidden: tuple[Path, ...] = HIDDEN_ALWAYS, masked: tuple[Path, ...] = ()
) -> SandboxSpec:
    """The recipe sandbox: the system's directories and this installation read-only, the
    clone writable, nothing else; no network; RECIPE_ENV; ``hidden`` empty and ``masked``
    files empty where they would show (a run's: ``stage_sandbox.hidden_for`` and
    ``secret_files``)."""
    return SandboxSpec(
        writable=(clone,),
        hidden=hidden,
        masked=masked,
        network=False,
        env_names=RECIPE_ENV,
        env_prefixes=RECIPE_ENV_PREFIXES,
        home_git_config=True,
    )


def recipe_executor(
    executor: Executor,
    *,
    clone: Path,
    mode: RecipeSandbox,
    locate: BwrapLocator = bundled_bwrap,
    hidden: tuple[Path, ...] = HIDDEN_ALWAYS,
    masked: tuple[Path, ...] = (),
) -> tuple[Executor, str | None]:
    """The executor a recipe runs through, and None; or, when the sandbox is asked for
    and cannot start here, the reason the recipe is refused (nothing may run then)."""
    if mode == "none":
        return executor, None
    sandbox = SandboxedExecutor(executor, recipe_spec(clone, hidden, masked), locate=locate)
    reason = sandbox.unavailable()
    if reason is not None:
        return sandbox, (
            f"recipe refused: the recipe sandbox cannot start ({reason}); nothing was run. "
            f'To run recipes, {REMEDY}; or set [recovery] recipe_sandbox = "none" to run '
            "them unsandboxed"
        )
    return sandbox, None


@dataclass(frozen=True)
class RecipeRun:
    commands: tuple[dict[str, Any], ...]  # per command run: argv, exit code, log (for the report)
    red_reason: str | None  # why the recipe failed; None when every command succeeded


def run_recipe(
    argvs: tuple[tuple[str, ...], ...],
    *,
    executor: Executor,
    clone: Path,
    env: Mapping[str, str],
    log_path: Callable[[int], Path],
    timeout_s: float,
    kill_after_s: float,
    note: Callable[[str], None],
    between: Callable[[], str | None] = lambda: None,
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
) -> RecipeRun:
    """Run each command; ``log_path(i)`` is command i's log (1-based). ``between`` runs
    after each command that succeeded: a reason it returns stops the recipe there (what
    one command left must not be used by the next)."""
    commands: list[dict[str, Any]] = []
    for index, argv in enumerate(argvs, start=1):
        note(f"recipe {index}/{len(argvs)}: {shlex.join(argv)}")
        outcome = executor.run(
            ProcessRequest(
                argv,
                cwd=clone,
                env=env,
                log_path=log_path(index),
                timeout_s=timeout_s,
                kill_after_s=kill_after_s,
                max_log_bytes=max_log_bytes,
            )
        )
        commands.append(
            {"argv": list(argv), "exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
             "signal": outcome.signal, "log_path": str(outcome.log_path), "error": outcome.error}
        )  # fmt: skip
        if not outcome.ok:
            how = "timed out" if outcome.timed_out else f"exited {outcome.exit_code}"
            if outcome.signal:
                how = f"was killed by signal {outcome.signal} (exit {outcome.exit_code})"
            return RecipeRun(tuple(commands), f"recipe command {index} {how}")
        stop = between()
        if stop is not None:
            return RecipeRun(tuple(commands), f"after recipe command {index}: {stop}")
    return RecipeRun(tuple(commands), None)
