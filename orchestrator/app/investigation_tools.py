"""The read-only tools the bounded investigation may call, and the investigator that runs
the loop inside the graph's ``llm_decision`` node.

Tools read the clone and nothing else: ``read_file`` (a path inside the clone, not under
``.git``), ``git_log`` (through the injected executor: where every process starts), ``grep``
(literal text, in Python). Every result is capped and redacted by the loop.

The clone is untrusted, and a committed symbolic link (``docs -> /etc``,
``x -> ../../secret``) is a door out of it: every path is resolved, links included, and
must still be inside the clone; grep never follows a link at all (as ``grep -r``); git
reads the clone's own ``.git`` directory or nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.domain.config import Config
from orchestrator.execution.attempts import git_sandbox
from orchestrator.execution.git import hardened_git_env
from orchestrator.execution.process import HeadRequest
from orchestrator.recovery.context import head_bytes
from orchestrator.recovery.diagnose import Decision
from orchestrator.recovery.investigate import Tool, investigator

if TYPE_CHECKING:
    from orchestrator.app.services import Services
    from orchestrator.execution.executor import Executor
    from orchestrator.recovery.graph_state import GraphDeps, GraphState

MAX_TOOL_BYTES = 16 * 1024
MAX_GREP_MATCHES = 50
MAX_GREP_FILE_BYTES = 1_000_000


def _inside(clone: Path, relative: str) -> Path:
    """``relative`` resolved (every link followed) and still inside the clone, outside
    its ``.git``; ValueError otherwise."""
    target = (clone / relative).resolve()
    root = clone.resolve()
    if not target.is_relative_to(root) or target.is_relative_to(root / ".git"):
        raise ValueError(f"{relative!r} is not a file of the clone")
    return target


def _is_regular(path: Path) -> bool:
    """A regular file, not a link to one (nor a FIFO a read would wait on for ever)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _regular_files(root: Path) -> Iterator[Path]:
    """The clone's regular files outside ``.git``, in order, reached without following a
    link: ``os.walk`` does not descend into a linked directory, and a link to a file is
    not a regular file."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(directory) / name
            if _is_regular(path):
                yield path


def _read_unfollowed(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` + 1 bytes of ``path``; None when it is not a regular file any
    more (replaced by a link since it was listed: ``O_NOFOLLOW`` refuses to open it)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(limit + 1)


def own_git_dir(clone: Path) -> Path | None:
    """The clone's ``.git`` when it is a directory of the clone's own: not a link, not a
    ``gitdir:`` file, and with no ``commondir`` or object alternates (each makes git read
    another repository's refs or objects). None otherwise."""
    git_dir = clone.resolve() / ".git"
    try:
        if not stat.S_ISDIR(os.lstat(git_dir).st_mode):
            return None
    except OSError:
        return None
    if any(os.path.lexists(git_dir / p) for p in ("commondir", "objects/info/alternates")):
        return None
    return git_dir


def clone_tools(
    clone: Path, environ: Mapping[str, str], executor: Executor | None = None
) -> dict[str, Tool]:
    """The tools over ``clone``. Without an executor (replay only lists their names)
    ``git_log`` cannot start git and says so."""

    def read_file(args: Mapping[str, Any]) -> str:
        path = _inside(clone, str(args.get("path", "")))
        if not _is_regular(path):
            return f"no such file: {args.get('path')}"
        return head_bytes(path, MAX_TOOL_BYTES).text

    def git_log(args: Mapping[str, Any]) -> str:
        count = max(1, min(int(args.get("n", 20)), 200))
        if executor is None:
            return "git_log is unavailable here: no executor"
        git_dir = own_git_dir(clone)
        if git_dir is None:
            return "git_log is unavailable: the clone's .git is not a repository of its own"
        env = hardened_git_env({k: v for k, v in environ.items() if k in ("PATH", "HOME", "LANG")})
        env["GIT_DIR"] = str(git_dir)  # no discovery: this repository and no other
        argv = ("git", "log", "--oneline", "--no-color", f"-n{count}")
        captured = executor.capture_head(
            HeadRequest(argv, cwd=clone, env=env, max_bytes=MAX_TOOL_BYTES, timeout_s=30.0)
        )
        return captured.data.decode("utf-8", "replace") or (captured.error or "")

    def grep(args: Mapping[str, Any]) -> str:
        needle = str(args.get("text", ""))
        if not needle:
            return "grep needs non-empty text"
        matches: list[str] = []
        root = clone.resolve()
        for path in _regular_files(root):
            data = _read_unfollowed(path, MAX_GREP_FILE_BYTES)
            if data is None or len(data) > MAX_GREP_FILE_BYTES:
                continue
            lines = data.decode("utf-8", "replace").splitlines()
            for number, line in enumerate(lines, start=1):
                if needle in line:
                    matches.append(f"{path.relative_to(root)}:{number}: {line[:200]}")
                    if len(matches) >= MAX_GREP_MATCHES:
                        return "\n".join(matches) + "\n(more matches cut)"
        return "\n".join(matches) or "no matches"

    return {"read_file": read_file, "git_log": git_log, "grep": grep}


def investigator_for(
    config: Config, services: Services, clone: Path
) -> Callable[[GraphState, GraphDeps], Decision] | None:
    """The investigation loop for the graph's llm_decision node, or None in single mode."""
    if config.diagnosis.mode != "investigate":
        return None
    return investigator(
        tools=clone_tools(clone, services.environ, git_sandbox(services, clone)),
        allow=frozenset(config.diagnosis.tools),
        max_steps=config.diagnosis.max_steps,
        max_tokens=config.model.max_tokens,
    )
