"""Per-ticket spending across all of its runs: every diagnosis and every retry-like
recovery is a charge, appended and persisted *before* the thing it pays for happens.

``.state/tickets/<ticket-id>.json`` holds the list of charges; counts are derived from
it. A charge carries a key: charging the same key twice is a no-op, so re-executing a
persisted verdict after a crash never spends its retry twice. Diagnoses get a fresh key
each time: a call that may have happened is never refunded.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from orchestrator.domain.validation import Frozen, read_model
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

ChargeKind = Literal["diagnosis", "retry", "infra-retry"]


class Charge(Frozen):
    kind: ChargeKind
    key: str
    run_id: str
    at: datetime


class CapsReset(Frozen):
    """A person cleared the ticket's caps: the charges made before it no longer count
    against them (they stay on file: a charged key is never charged again)."""

    at: datetime
    by: str
    reason: str
    after: int  # how many charges the budget held when it was reset
    cleared: dict[str, int]  # what had been spent, per kind, for the record


class TicketBudget(Frozen):
    ticket_id: str
    charges: tuple[Charge, ...] = ()
    resets: tuple[CapsReset, ...] = ()  # absent from files written before resets existed

    def current(self) -> tuple[Charge, ...]:
        """The charges that count against the caps: those since the last reset."""
        return self.charges[self.resets[-1].after :] if self.resets else self.charges

    def spent(self, kind: ChargeKind) -> int:
        return sum(1 for c in self.current() if c.kind == kind)

    def has(self, kind: ChargeKind, key: str) -> bool:
        return any(c.kind == kind and c.key == key for c in self.charges)


class BudgetStore:
    """Callers hold the ticket's lock, so read-modify-write here does not race."""

    def __init__(self, state_dir: Path) -> None:
        self._layout = StateLayout(state_dir)

    def path(self, ticket_id: str) -> Path:
        return self._layout.ticket_budget_path(ticket_id)

    def load(self, ticket_id: str) -> TicketBudget:
        budget = read_model(self.path(ticket_id), TicketBudget, "ticket budget")
        return budget or TicketBudget(ticket_id=ticket_id)

    def reset(self, ticket_id: str, *, by: str, reason: str, at: datetime) -> TicketBudget:
        """Clear the ticket's caps (a person decided so): later charges start from zero."""
        budget = self.load(ticket_id)
        cleared = {kind: budget.spent(kind) for kind in ("diagnosis", "retry", "infra-retry")}
        entry = CapsReset(at=at, by=by, reason=reason, after=len(budget.charges), cleared=cleared)
        budget = budget.model_copy(update={"resets": (*budget.resets, entry)})
        atomic_write(self.path(ticket_id), budget.model_dump_json(indent=2).encode())
        crash_point(CrashPoint.CAPS_RESET)
        return budget

    def charge(
        self, ticket_id: str, kind: ChargeKind, key: str, *, run_id: str, at: datetime
    ) -> TicketBudget:
        budget = self.load(ticket_id)
        if budget.has(kind, key):
            return budget
        budget = budget.model_copy(
            update={"charges": (*budget.charges, Charge(kind=kind, key=key, run_id=run_id, at=at))}
        )
        atomic_write(self.path(ticket_id), budget.model_dump_json(indent=2).encode())
        crash_point(CrashPoint.DIAGNOSIS_CHARGE if kind == "diagnosis" else CrashPoint.RETRY_CHARGE)
        return budget
