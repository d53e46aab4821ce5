"""Verdict files: ``.state/runs/<run-id>.verdict-<n>.json``, one per decision, written
before anything it decided is executed, and never rewritten afterwards."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import Frozen, read_model
from orchestrator.storage.atomic import atomic_write


class TokenUsage(Frozen):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class VerdictRecord(Frozen):
    number: int
    decision_id: str
    run_id: str
    ticket_id: str
    attempt: int
    failing_stage: str
    failing_check: str | None
    source: str  # model | playbook | synthetic
    action: str
    valid: bool  # False: the proposal was invalid and ``verdict`` is the abandon-human in its place
    reason: str
    halt: str | None
    verdict: dict[str, Any]
    errors: tuple[str, ...] = ()
    playbook_entry: str | None = None
    model: str | None = None
    prompt_version: str
    usage: TokenUsage = TokenUsage()
    replies: tuple[str, ...] = ()
    bundle_path: str | None = None
    created_at: datetime
    # The proposal as the graph shaped it: confidence, routing, reasoning, evidence.
    proposal: dict[str, Any]
    # The decision's inputs (RecoveryContext without the bundle text): what replay rebuilds.
    # Empty in files written before they were recorded: those cannot be replayed.
    inputs: dict[str, Any] = Field(default_factory=dict)


def write_verdict(path: Path, record: VerdictRecord) -> None:
    """Write once. A second write of the same decision (redelivery) keeps the first."""
    if path.exists():
        return
    atomic_write(path, record.model_dump_json(indent=2).encode())


def read_verdict(path: Path) -> VerdictRecord:
    verdict = read_model(path, VerdictRecord, "verdict file")
    if verdict is None:
        raise StateError(f"state error: {path}: no such verdict file")
    return verdict
