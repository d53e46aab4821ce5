"""What the graph's last two nodes prepare: the agent's audit memory (``memory_write``)
and its ledger entries (``exit``), as data (the records: ``orchestrator/domain/decisions.py``).

The graph writes nothing itself: the caller persists exactly these objects, in order,
before anything decided runs. Keeping them as values the nodes return is what lets a
test pin the audit row of a decision without a state dir, and what lets a redelivered
decision rebuild the same ledger entries from its persisted memory (``ledger_entries``
is a pure function of it).
"""

from __future__ import annotations

from orchestrator.domain.decisions import AuditMemory, LedgerEntry
from orchestrator.domain.proposals import RecoveryContext
from orchestrator.domain.transcripts import ToolCall

CAPABILITY = "stage-recovery"


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
