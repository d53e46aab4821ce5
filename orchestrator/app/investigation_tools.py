"""The read-only tools the bounded investigation may call, and the investigator that runs
the loop inside the graph's ``llm_decision`` node.

Tools read the clone and nothing else: ``read_file`` (a path inside the clone, not under
``.git``), ``git_log`` (through the injected executor: where every process starts), ``grep``
(literal text, in Python). Every result is capped and redacted by the loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.domain.config import Config
from orchestrator.execution.git import hardened_git_env
from orchestrator.recovery.context import head_bytes
from orchestrator.recovery.diagnose import Decision
from orchestrator.recovery.investigate import Tool, investigator

if TYPE_CHECKING:
    from orchestrator.execution.attempts import Services
    from orchestrator.execution.executor import Executor
    from orchestrator.recovery.graph import GraphDeps, GraphState

MAX_TOOL_BYTES = 16 * 1024
MAX_GREP_MATCHES = 50
MAX_GREP_FILE_BYTES = 1_000_000


def _inside(clone: Path, relative: str) -> Path:
    target = (clone / relative).resolve()
    root = clone.resolve()
    if not target.is_relative_to(root) or target.is_relative_to(root / ".git"):
        raise ValueError(f"{relative!r} is not a file of the clone")
    return target


def clone_tools(
    clone: Path, environ: Mapping[str, str], executor: Executor | None = None
) -> dict[str, Tool]:
    """The tools over ``clone``. Without an executor (replay only lists their names)
    ``git_log`` cannot start git and says so."""

    def read_file(args: Mapping[str, Any]) -> str:
        path = _inside(clone, str(args.get("path", "")))
        if not path.is_file():
            return f"no such file: {args.get('path')}"
        return head_bytes(path, MAX_TOOL_BYTES).text

    def git_log(args: Mapping[str, Any]) -> str:
        count = max(1, min(int(args.get("n", 20)), 200))
        if executor is None:
            return "git_log is unavailable here: no executor"
        captured = executor.capture_head(
            ("git", "log", "--oneline", "--no-color", f"-n{count}"),
            cwd=clone,
            env=hardened_git_env(
                {k: v for k, v in environ.items() if k in ("PATH", "HOME", "LANG")}
            ),
            max_bytes=MAX_TOOL_BYTES,
            timeout_s=30.0,
        )
        return captured.data.decode("utf-8", "replace") or (captured.error or "")

    def grep(args: Mapping[str, Any]) -> str:
        needle = str(args.get("text", ""))
        if not needle:
            return "grep needs non-empty text"
        matches: list[str] = []
        for directory, dirs, files in os.walk(clone):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(files):
                path = Path(directory) / name
                try:
                    if path.stat().st_size > MAX_GREP_FILE_BYTES:
                        continue
                    lines = path.read_text(errors="replace").splitlines()
                except OSError:
                    continue
                for number, line in enumerate(lines, start=1):
                    if needle in line:
                        matches.append(f"{path.relative_to(clone)}:{number}: {line[:200]}")
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
        tools=clone_tools(clone, services.environ, services.executor),
        allow=frozenset(config.diagnosis.tools),
        max_steps=config.diagnosis.max_steps,
        max_tokens=config.model.max_tokens,
    )
