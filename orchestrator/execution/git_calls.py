"""The orchestrator's own git calls in a clone (not a stage's, not a recipe's): where
HEAD is, what changed, a clean checkout of HEAD for the verifier, and putting a clone back
after a failed recipe. All through the executor, every one with the hardened environment
of ``git`` (``hardened_git_env``, the clone's drivers switched off), and each config it
would apply checked first where a checkout would read it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.execution.git import (
    MAX_CONFIG_LISTING_BYTES,
    carried_overrides,
    clone_git_env,
    config_problem,
    hardened_git_env,
)
from orchestrator.execution.process import CapturedHead, HeadRequest, ProcessRequest

if TYPE_CHECKING:
    from orchestrator.execution.executor import Executor

# Bounds for a git call in a clone: a local operation, never a fetch or push.
GIT_TIMEOUT_S = 60.0
GIT_KILL_AFTER_S = 5.0


def head_commit(executor: Executor, clone: Path, env: Mapping[str, str]) -> str | None:
    """The commit HEAD names, or None when there is none (no repository, no commit)."""
    head = _query(executor, ("git", "rev-parse", "HEAD"), clone, env, max_bytes=100, timeout_s=30)
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
    it succeeded (never when there was nothing to restore to). A reset checks files out,
    so the clone's drivers are switched off first (``clone_git_env``)."""
    git_env = clone_git_env(executor, clone, env)
    steps: list[tuple[str, ...]] = [("git", "update-ref", keep_as, "HEAD")]
    if restore_to is not None:
        steps += [("git", "reset", "--hard", restore_to), ("git", "clean", "-fd")]
    ok = True
    for index, argv in enumerate(steps, start=1):
        log_path = log_prefix.with_name(f"{log_prefix.name}-{index}.log")
        ok = _run(executor, argv, clone, git_env, log_path) and ok
    return ok and restore_to is not None


def status_entries(executor: Executor, clone: Path, env: Mapping[str, str]) -> list[str] | None:
    """``git status --porcelain`` entries (``" D tests/x.py"``, ``"?? new"``), or None
    when git could not say."""
    argv = ("git", "status", "--porcelain=v1", "-z", "--untracked-files=all")
    status = _query(executor, argv, clone, env)
    if status.exit_code != 0 or status.truncated:
        return None
    entries: list[str] = []
    fields = status.data.decode("utf-8", "replace").split("\0")
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if not field:
            continue
        entries.append(field)
        if field[:1] in ("R", "C"):  # a rename's source follows as its own field
            index += 1
    return entries


def changed_paths(
    executor: Executor, clone: Path, env: Mapping[str, str], since: str, until: str
) -> list[str] | None:
    """The paths the commits ``since..until`` add, change, delete or rename (both
    names of a rename), or None when git could not say."""
    argv = ("git", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
            since, until)  # fmt: skip
    diff = _query(executor, argv, clone, env)
    if diff.exit_code != 0 or diff.truncated:
        return None
    return [p for p in diff.data.decode("utf-8", "replace").split("\0") if p]


def add_checkout(
    executor: Executor, clone: Path, checkout: Path, env: Mapping[str, str], log_path: Path
) -> str | None:
    """A clean checkout of the clone's HEAD at ``checkout`` (a detached work tree that
    shares the clone's objects and refs): what a push of HEAD would ship. None when it
    was made, else why not. It is filled only once the config as git sees it from there
    (where an ``includeIf "gitdir:…/worktrees/…"`` would match) passes
    ``config_problem``, with the drivers that config names switched off."""
    remove_checkout(executor, clone, checkout, env, log_path)  # a crashed run's leftover
    add = ("git", "worktree", "add", "--detach", "--no-checkout", str(checkout), "HEAD")
    if not _run(executor, add, clone, _hardened(env), log_path):
        return "git could not add the checkout"
    problem = config_problem(executor, checkout, env)
    if problem is not None:
        return f"{problem} (read in the verification checkout)"
    fill = ("git", "reset", "--hard", "--quiet", "HEAD")
    filled = _run(executor, fill, checkout, clone_git_env(executor, checkout, env), log_path)
    return None if filled else "git could not fill the checkout"


def remove_checkout(
    executor: Executor, clone: Path, checkout: Path, env: Mapping[str, str], log_path: Path
) -> None:
    """Remove a checkout made by ``add_checkout`` and forget it in the clone."""
    if checkout.exists():
        remove = ("git", "worktree", "remove", "--force", "--force", str(checkout))
        _run(executor, remove, clone, _hardened(env), log_path)
        if checkout.exists() and not checkout.is_symlink():
            shutil.rmtree(checkout, ignore_errors=True)
    _run(executor, ("git", "worktree", "prune"), clone, _hardened(env), log_path)


def _hardened(env: Mapping[str, str]) -> dict[str, str]:
    return hardened_git_env(env, carried_overrides(env))


def _run(
    executor: Executor, argv: tuple[str, ...], cwd: Path, env: Mapping[str, str], log_path: Path
) -> bool:
    """One git call in ``cwd`` with ``env`` as given, bounded (a local operation); whether
    it succeeded."""
    request = ProcessRequest(argv, cwd=cwd, env=env, log_path=log_path, timeout_s=GIT_TIMEOUT_S,
                             kill_after_s=GIT_KILL_AFTER_S)  # fmt: skip
    return executor.run(request).ok


def _query(
    executor: Executor,
    argv: tuple[str, ...],
    clone: Path,
    env: Mapping[str, str],
    *,
    max_bytes: int = MAX_CONFIG_LISTING_BYTES,
    timeout_s: float = GIT_TIMEOUT_S,
) -> CapturedHead:
    """At most ``max_bytes`` of what a git query in ``clone`` prints, hardened."""
    return executor.capture_head(
        HeadRequest(argv, cwd=clone, env=_hardened(env), max_bytes=max_bytes, timeout_s=timeout_s)
    )
