"""Running a mechanical-fix recipe: its argv lists (already vetted by ``plan_recipe``),
one after another in the clone, through the executor, stopping at the first that fails."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.execution.executor import Executor


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
) -> RecipeRun:
    """Run each command; ``log_path(i)`` is command i's log (1-based). ``between`` runs
    after each command that succeeded: a reason it returns stops the recipe there (what
    one command left must not be used by the next)."""
    commands: list[dict[str, Any]] = []
    for index, argv in enumerate(argvs, start=1):
        note(f"recipe {index}/{len(argvs)}: {shlex.join(argv)}")
        outcome = executor.run(
            argv,
            cwd=clone,
            env=env,
            log_path=log_path(index),
            timeout_s=timeout_s,
            kill_after_s=kill_after_s,
        )
        commands.append(
            {"argv": list(argv), "exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
             "log_path": str(outcome.log_path), "error": outcome.error}
        )  # fmt: skip
        if not outcome.ok:
            how = "timed out" if outcome.timed_out else f"exited {outcome.exit_code}"
            return RecipeRun(tuple(commands), f"recipe command {index} {how}")
        stop = between()
        if stop is not None:
            return RecipeRun(tuple(commands), f"after recipe command {index}: {stop}")
    return RecipeRun(tuple(commands), None)
