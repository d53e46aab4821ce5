"""Verdict files: ``.state/runs/<run-id>.verdict-<n>.json``, one per decision, written
before anything it decided is executed, and never rewritten afterwards.

A verdict file holds the typed decision: the verdict, the proposal with its evidence, the
inputs it was made from (the ``RecoveryContext`` without the bundle text) and the call
transcript, whose reply texts sit beside it (``orchestrator.storage.transcripts``).

Files written before these were typed still read: their evidence list is read into the
typed evidence, their ``inputs`` (the same shape) into a ``RecoveryContext``, and the
``replies`` they kept instead of a transcript stay readable.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import field_validator

from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import read_model
from orchestrator.recovery.audit import AuditMemory, TokenUsage
from orchestrator.storage.atomic import atomic_write


class VerdictRecord(AuditMemory):
    """The audit memory the graph prepared, numbered in its run and stamped when written."""

    number: int
    created_at: datetime
    # Files written before the transcript kept the replies here, redacted and cut.
    replies: tuple[str, ...] = ()

    @field_validator("inputs", mode="before")
    @classmethod
    def _no_inputs(cls, value: Any) -> Any:
        # Older files wrote an empty object where there were no inputs.
        return None if value == {} else value


def write_verdict(path: Path, record: VerdictRecord) -> None:
    """Write once. A second write of the same decision (redelivery) keeps the first."""
    if path.exists():
        return
    # ``replies`` is the older files' field: a new file says it all in its transcript.
    legacy = set() if record.replies else {"replies"}
    atomic_write(path, record.model_dump_json(indent=2, exclude=legacy).encode())


def read_verdict(path: Path) -> VerdictRecord:
    verdict = read_model(path, VerdictRecord, "verdict file")
    if verdict is None:
        raise StateError(f"state error: {path}: no such verdict file")
    return verdict


__all__ = ["TokenUsage", "VerdictRecord", "read_verdict", "write_verdict"]
