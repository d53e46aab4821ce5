"""The orchestrator's own git calls in a clone (not a stage's, not a recipe's): where
HEAD is, and putting a clone back after a failed recipe. All through the executor."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.execution.executor import Executor

GIT_TIMEOUT_S = 60.0
GIT_KILL_AFTER_S = 5.0


def head_commit(executor: Executor, clone: Path, env: Mapping[str, str]) -> str | None:
    """The commit HEAD names, or None when there is none (no repository, no commit)."""
    head = executor.capture_head(
        ("git", "rev-parse", "HEAD"), cwd=clone, env=env, max_bytes=100, timeout_s=30
    )
    if head.exit_code != 0:
        return None
    return head.data.decode().strip() or None


def keep_and_restore(
    executor: Executor,
    clone: Path,
    *,
    keep_as: str,
    restore_to: str | None,
    env: Mapping[str, str],
    log_prefix: Path,
) -> bool:
    """Keep what the clone's HEAD is now as the ref ``keep_as`` (for inspection), then
    reset the clone hard to ``restore_to`` and drop untracked files. True when all of
    it succeeded (never when there was nothing to restore to)."""
    steps: list[tuple[str, ...]] = [("git", "update-ref", keep_as, "HEAD")]
    if restore_to is not None:
        steps += [("git", "reset", "--hard", restore_to), ("git", "clean", "-fd")]
    ok = True
    for index, argv in enumerate(steps, start=1):
        outcome = executor.run(
            argv,
            cwd=clone,
            env=env,
            log_path=log_prefix.with_name(f"{log_prefix.name}-{index}.log"),
            timeout_s=GIT_TIMEOUT_S,
            kill_after_s=GIT_KILL_AFTER_S,
        )
        ok = ok and outcome.ok
    return ok and restore_to is not None
