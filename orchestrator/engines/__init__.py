"""Coding engines: one adapter per kind, chosen by ``[engines.NAME] kind`` in config.

    kind            program          prompt                 reports
    claude-code     claude -p        stdin (prompt file)    turns, cost, final message
    codex           codex exec       stdin (prompt file)    turns, final message
    aider           aider            --message-file         turns (LLM calls), cost
    command         any argv         {prompt_file}          exit status only
    patch           implement_patch  the ticket's patch     exit status only

``adapter.invocation(task)`` says what to run; ``adapter.report(log_text, exit_code,
timed_out)`` reads what happened; ``classify`` gives the attempt's final ``FailureClass``
(None: success). Nothing here starts a process or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from orchestrator.engines import aider, claude_code, codex, command, patch
from orchestrator.engines.base import (
    EngineAdapter,
    EngineReport,
    EngineTask,
    FailureClass,
    Invocation,
    build_prompt,
)
from orchestrator.engines.classify import INFRA, classify, match_infra

ADAPTERS: Mapping[str, EngineAdapter] = MappingProxyType(
    {
        claude_code.ADAPTER.name: claude_code.ADAPTER,
        codex.ADAPTER.name: codex.ADAPTER,
        aider.ADAPTER.name: aider.ADAPTER,
        command.ADAPTER.name: command.ADAPTER,
        patch.ADAPTER.name: patch.ADAPTER,
    }
)


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter for an engine kind; ValueError naming the known kinds otherwise."""
    try:
        return ADAPTERS[kind]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise ValueError(f"unknown engine kind {kind!r} (known: {known})") from None


__all__ = [
    "ADAPTERS",
    "INFRA",
    "EngineAdapter",
    "EngineReport",
    "EngineTask",
    "FailureClass",
    "Invocation",
    "adapter_for",
    "build_prompt",
    "classify",
    "match_infra",
]
