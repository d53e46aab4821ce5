"""What the graph's last two nodes prepare: the agent's audit memory (``memory_write``)
and its ledger entries (``exit``), as data.

The graph writes nothing itself: the caller persists exactly these objects, in order,
before anything decided runs. Keeping them as values the nodes return is what lets a
test pin the audit row of a decision without a state dir, and what lets a redelivered
decision rebuild the same ledger entries from its persisted memory (``ledger_entries``
is a pure function of it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from orchestrator.domain.validation import Frozen
from orchestrator.recovery.proposal import Proposal, RecoveryContext
from orchestrator.recovery.transcript import ToolCall, TranscriptEntry
from orchestrator.domain.verdicts import Verdict

CAPABILITY = "stage-recovery"


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


def ledger_entries(
    memory: AuditMemory, ctx: RecoveryContext, trace: tuple[str, ...]
) -> tuple[LedgerEntry, ...]:
    """One row per investigation tool step (the loop is as reconstructable as a call),
    then the decision's row, which names the nodes the decision passed through."""
    common = {
        "decision_id": memory.decision_id,
        "ticket": ctx.ticket_id,
        "run": ctx.run_id,
        "capability": CAPABILITY,
        "inputs_hash": ctx.inputs_hash,
        "prompt_version": memory.prompt_version,
    }
    steps = tuple(
        LedgerEntry(
            kind="trace", model_version="none", source="model", confidence=None, routing=None,
            decision={"step": step.step, "tool": step.tool, "args": dict(step.args),
                      "result_digest": step.result_sha256, "result_chars": step.result_chars},
            **common,
        )
        for step in memory.transcript or ()
        if isinstance(step, ToolCall)
    )  # fmt: skip
    decision = LedgerEntry(
        kind="decision",
        model_version=memory.model or "none",
        source=memory.source,
        decision={
            "verdict": memory.proposal.action.model_dump(mode="json"),
            "signature": ctx.signature,
            "trace": list(trace),
        },
        confidence=memory.proposal.confidence,
        routing=memory.proposal.routing,
        **common,
    )
    return (*steps, decision)
