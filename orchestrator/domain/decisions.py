"""The records of one decision, as the recovery graph's last two nodes prepare them: the
audit memory (``memory_write``), which the verdict file holds
(``orchestrator/storage/decisions.py``), and the ledger entries (``exit``).

Only the records live here; the graph makes them (``orchestrator/recovery/graph.py``), and
``orchestrator/recovery/audit.py`` derives a decision's ledger entries from its memory.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from orchestrator.domain.proposals import Proposal, RecoveryContext
from orchestrator.domain.transcripts import TranscriptEntry
from orchestrator.domain.validation import Frozen
from orchestrator.domain.verdicts import Verdict

__all__ = ["AuditMemory", "LedgerEntry", "TokenUsage"]


class TokenUsage(Frozen):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class AuditMemory(Frozen):
    """The decision as its verdict file records it, less what only the writer knows (its
    number in the run and the time it was written)."""

    decision_id: str
    run_id: str
    ticket_id: str
    attempt: int
    failing_stage: str
    failing_check: str | None
    source: str  # model | playbook | synthetic | infra
    action: str
    valid: bool  # False: the proposal was invalid and ``verdict`` is the abandon-human in its place
    reason: str
    halt: str | None
    verdict: Verdict
    errors: tuple[str, ...] = ()
    playbook_entry: str | None = None
    model: str | None = None
    prompt_version: str
    usage: TokenUsage = TokenUsage()
    bundle_path: str | None = None
    # The proposal as the graph shaped it: confidence, routing, reasoning, evidence.
    proposal: Proposal
    # The decision's inputs: what replay rebuilds. None in files written before they
    # were recorded: those cannot be replayed.
    inputs: RecoveryContext | None = None
    # Every call, in order. None in files written before there was one.
    transcript: tuple[TranscriptEntry, ...] | None = None

    @field_validator("inputs", mode="before")
    @classmethod
    def _first_rules_unless_said(cls, value: Any) -> Any:
        """Stored inputs that do not name their confidence rules were decided under the
        first ones: replay applies those, not today's."""
        if isinstance(value, dict) and value and "confidence_rules" not in value:
            return {**value, "confidence_rules": 1}
        return value


class LedgerEntry(Frozen):
    """One ledger row's content; the ledger adds its time, sequence and hashes."""

    kind: Literal["decision", "trace"]
    decision_id: str
    ticket: str
    run: str
    capability: str
    inputs_hash: str
    model_version: str
    prompt_version: str
    source: str
    decision: dict[str, Any]
    confidence: float | None
    routing: str | None
