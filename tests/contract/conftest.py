"""The released agents (``claude_bin``, ``codex_bin``, ``aider_bin``: installed at pinned
versions on first use, see ``agents.py``) for every contract test."""

from __future__ import annotations

from .agents import aider_bin, claude_bin, codex_bin

__all__ = ["aider_bin", "claude_bin", "codex_bin"]
