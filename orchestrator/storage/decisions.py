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

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import field_validator

from orchestrator.domain.decisions import AuditMemory, TokenUsage
from orchestrator.domain.errors import StateError
from orchestrator.domain.jsonwalk import map_strings, valid_text
from orchestrator.domain.validation import read_model
from orchestrator.redaction import redact
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point


class VerdictRecord(AuditMemory):
    """The audit memory the graph prepared, numbered in its run and stamped when written."""

    number: int
    created_at: datetime
    # Files written before the transcript kept the replies here, redacted and cut.
    replies: tuple[str, ...] = ()
    # Lone surrogates (text with no UTF-8 form) replaced by U+FFFD when the file was
    # written: the file is always valid UTF-8, and says when it had to be made so.
    lone_surrogates_replaced: int = 0

    @field_validator("inputs", mode="before")
    @classmethod
    def _no_inputs(cls, value: Any) -> Any:
        # Older files wrote an empty object where there were no inputs.
        if value == {}:
            return None
        # What the failure said came from the stage: files written before it was redacted
        # at the source are redacted as they are read (``verdicts --json`` prints this).
        if isinstance(value, dict) and isinstance(value.get("failure"), dict):
            failure, _ = map_strings(value["failure"], lambda text: (redact(text), 0))
            value = {**value, "failure": failure}
        return value


def write_verdict(path: Path, record: VerdictRecord) -> None:
    """Write once. A second write of the same decision (redelivery) keeps the first."""
    if path.exists():
        return
    # ``replies`` is the older files' field: a new file says it all in its transcript.
    legacy = set() if record.replies else {"replies"}
    try:
        data = record.model_dump_json(indent=2, exclude=legacy).encode()
    except ValueError:  # pydantic's serialization error: text with no UTF-8 form
        # A lone surrogate somewhere (the validated verdict never has one; a reason or an
        # error message quoting something odd might): replace it rather than lose the file.
        dumped, count = valid_json(record.model_dump(mode="json", exclude=legacy))
        dumped["lone_surrogates_replaced"] = count
        data = json.dumps(dumped, indent=2, ensure_ascii=False).encode()
    atomic_write(path, data)
    crash_point(CrashPoint.VERDICT)


def valid_json(value: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of a JSON object with every lone surrogate, in keys and strings, replaced
    by U+FFFD, and how many were."""
    fixed, count = map_strings(value, valid_text, keys=True)
    return fixed, count


def read_verdict(path: Path) -> VerdictRecord:
    verdict = read_model(path, VerdictRecord, "verdict file")
    if verdict is None:
        raise StateError(f"state error: {path}: no such verdict file")
    return verdict


__all__ = ["TokenUsage", "VerdictRecord", "read_verdict", "write_verdict"]
