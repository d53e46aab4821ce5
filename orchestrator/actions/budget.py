"""The retry budget a re-running action is charged against, before it runs.

Plain retries and infrastructure retries have their own per-ticket caps; an
infrastructure retry also owes a back-off, doubling with each one spent, which the
caller waits out (``Effect.retry_after_s``). A verdict is charged once, under a key of
its own, and its back-off runs from the charge's persisted time: carrying it out again
after a crash neither spends twice nor restarts the wait.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.domain.config import RecoveryConfig
    from orchestrator.storage import Budgets, ChargeKind, TicketBudget

MAX_BACKOFF_S = 600.0


def backoff_s(base: float, retries_so_far: int) -> float:
    """Doubling back-off for infrastructure retries, capped at ten minutes."""
    return float(min(base * 2**retries_so_far, MAX_BACKOFF_S))


def charge_key(run_id: str, verdict_number: int) -> str:
    """The key a verdict's retry is charged under: one charge per decision."""
    return f"{run_id}:verdict-{verdict_number}"


@dataclass(frozen=True)
class RetryCharge:
    kind: ChargeKind
    key: str
    granted: bool
    refusal: str | None = None  # why the budget refuses (the cap is spent)
    retry_after_s: float | None = None  # the back-off owed before the re-run


def diagnoses_spent(budget: TicketBudget, unavailable: Iterable[str] = ()) -> int:
    """The diagnoses that count against the cap: not those of the decisions (ids
    ``unavailable``) whose model call the provider's outage failed (issue 43)."""
    prefixes = tuple(f"{decision_id}:" for decision_id in unavailable)
    return sum(
        1 for c in budget.current() if c.kind == "diagnosis" and not c.key.startswith(prefixes)
    )


def infra_retries_spent(budget: TicketBudget, since: datetime | None) -> int:
    """The infrastructure retries that count against the cap: those charged since the
    run last went on after waiting out an outage (``domain.infra_wait``; None: all)."""
    return sum(
        1 for c in budget.current() if c.kind == "infra-retry" and (since is None or c.at >= since)
    )


def decide_charge(
    budget: TicketBudget,
    *,
    key: str,
    infra: bool,
    recovery: RecoveryConfig,
    now: datetime,
    infra_since: datetime | None = None,
) -> RetryCharge:
    """Whether the verdict keyed ``key`` may re-run, and after how long. Pure.
    ``infra_since``: infrastructure retries charged before it were an outage's that the
    run waited out across batches, and no longer count (issue 43)."""
    kind: ChargeKind = "infra-retry" if infra else "retry"
    limit = recovery.max_infra_retries_per_ticket if infra else recovery.max_retries_per_ticket
    if budget.has(kind, key):  # charged before a crash: go on, waiting only what is left
        owed = (
            back_off_owed(budget, key=key, recovery=recovery, now=now, since=infra_since)
            if infra
            else None
        )
        return RetryCharge(kind, key, granted=True, retry_after_s=owed)
    spent = infra_retries_spent(budget, infra_since) if infra else budget.spent(kind)
    if spent >= limit:
        return RetryCharge(
            kind, key, granted=False,
            refusal=f"{kind} cap spent ({spent}/{limit} for this ticket)",
        )  # fmt: skip
    wait = backoff_s(recovery.infra_backoff_s, spent) if infra else None
    return RetryCharge(kind, key, granted=True, retry_after_s=wait)


def charge_retry(
    budgets: Budgets,
    *,
    ticket_id: str,
    run_id: str,
    verdict_number: int,
    infra: bool,
    recovery: RecoveryConfig,
    at: datetime,
    infra_since: datetime | None = None,
) -> RetryCharge:
    """Decide, and persist the charge when granted — before anything it pays for runs."""
    key = charge_key(run_id, verdict_number)
    charge = decide_charge(
        budgets.load(ticket_id), key=key, infra=infra, recovery=recovery, now=at,
        infra_since=infra_since,
    )  # fmt: skip
    if charge.granted:
        budgets.charge(ticket_id, charge.kind, key, run_id=run_id, at=at)
    return charge


def back_off_owed(
    budget: TicketBudget,
    *,
    key: str,
    recovery: RecoveryConfig,
    now: datetime,
    since: datetime | None = None,
) -> float | None:
    """What is left of the back-off verdict ``key`` was charged, at ``now``: the charge's
    time and its place among the ticket's infra retries are persisted, so a wait cut
    short by a crash or a stop is resumed, not restarted and not skipped. Pure."""
    # Its place among the infra retries since the caps were last reset (as it was charged);
    # a charge from before a reset keeps the place it had among all of them.
    index = None
    for charges in (budget.current(), budget.charges):
        infra = [c for c in charges if c.kind == "infra-retry" and (since is None or c.at >= since)]
        index = next((i for i, c in enumerate(infra) if c.key == key), None)
        if index is not None:
            break
    if index is None:
        return None
    waited = (now - infra[index].at).total_seconds()
    left = backoff_s(recovery.infra_backoff_s, index) - waited
    return left if left > 0 else None
