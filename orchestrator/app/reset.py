"""Clear a ticket's per-ticket caps after a person decided so (``orchestrator reset``).

The reset is a person's decision about the ticket, so it is recorded like one: a ledger
row (source ``human``, with who and why and what was cleared) appended *before* the
budget file is changed. The row is keyed by the ticket and the reset's number, so a reset
cut short between the two writes, and asked again, finds its row and does not append a
second one. Charges made before the reset stay on file (a key charged once is never
charged again); they just no longer count against the caps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from orchestrator.domain.errors import UsageError
from orchestrator.redaction import scrub
from orchestrator.storage import CapsReset, DecisionLedger, open_state
from orchestrator.storage.ledger import person_decision

CAPABILITY = "reset-caps"
REASON_MAX_CHARS = 1000
_TICKET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class ResetResult:
    """What was done: ``reset`` is None when nothing had been spent (nothing recorded)."""

    ticket_id: str
    reset: CapsReset | None
    ledger_hash: str | None


def reset_decision_id(ticket_id: str, number: int) -> str:
    return f"{ticket_id}:caps-reset-{number}"


def clean_reason(reason: str | None) -> str:
    """The reason as it is recorded: required, one line, secrets out, capped."""
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError('usage error: reset needs --reason "…": say why the caps are cleared')
    return scrub(text)[0][:REASON_MAX_CHARS]


def reset_caps(
    state_dir: Path,
    ledger: DecisionLedger,
    ticket_id: str,
    *,
    by: str,
    reason: str | None,
    at: datetime,
) -> ResetResult:
    """Record the reset in the ledger, then clear the caps. Holds the ticket's lock, so a
    run in progress is never reset under it (TicketLocked, exit 75)."""
    if not _TICKET_ID.match(ticket_id):
        raise UsageError(f"usage error: {ticket_id!r} is not a ticket id")
    why = clean_reason(reason)
    by = " ".join(by.split())[:200] or "unknown"
    storage = open_state(state_dir)
    budgets = storage.budgets
    with storage.locks.ticket(ticket_id):
        budget = budgets.load(ticket_id)
        cleared = {kind: budget.spent(kind) for kind in ("diagnosis", "retry", "infra-retry")}
        if not any(cleared.values()):
            return ResetResult(ticket_id, None, None)
        latest = storage.runs.latest_for_ticket(ticket_id)
        decision_id = reset_decision_id(ticket_id, len(budget.resets) + 1)
        row = next((r for r in ledger.rows_of(decision_id) if r.get("kind") == "decision"), None)
        if row is None:
            row = ledger.append(
                person_decision(
                    decision_id=decision_id,
                    ticket=ticket_id,
                    run=latest.run_id if latest else "",
                    capability=CAPABILITY,
                    inputs=budget.model_dump(mode="json"),
                    decision={"action": CAPABILITY, "by": by, "reason": why, "cleared": cleared},
                    at=at,
                )
            )
        else:  # recorded before a crash stopped it: carry out what was recorded
            by = str(row["decision"].get("by", by))
            why = str(row["decision"].get("reason", why))
        after = budgets.reset(ticket_id, by=by, reason=why, at=at)
    return ResetResult(ticket_id, after.resets[-1], str(row["entry_hash"]))
