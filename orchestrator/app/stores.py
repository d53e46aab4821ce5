"""The stores a ticket's run writes besides its record, and the ticket's lock, as the
use cases ask for them from ``Services.storage``: the state dir's own files and flock
locally; in a fleet, the shared state dir's stores fenced by the worker's claim, the
ledger under the fleet's lock, and the claim as the lock. Approvals are signed here."""

from __future__ import annotations

from contextlib import AbstractContextManager

from orchestrator.app.services import Services
from orchestrator.storage import ApprovalKeys, Budgets, Decisions, SignedApprovals


def decisions_of(services: Services) -> Decisions:
    return services.storage.decisions


def approval_keys_of(services: Services) -> ApprovalKeys:
    """The approval key as the run's own environment gives it, else the state dir's key
    file (in a fleet, the shared state dir's: one key for every machine)."""
    return ApprovalKeys.of(services.storage.runs.layout.approval_key_path, services.environ)


def approvals_of(services: Services) -> SignedApprovals:
    """The run's approvals, signed when written and verified when read."""
    return SignedApprovals(services.storage.approvals, approval_keys_of(services))


def budgets_of(services: Services) -> Budgets:
    return services.storage.budgets


def ticket_held(services: Services, ticket_id: str) -> AbstractContextManager[None]:
    """Hold the ticket for one driver: its flock locally, the worker's claim in a fleet
    (already won, so held here without waiting). Raises TicketLocked/TicketClaimed."""
    return services.storage.locks.ticket(ticket_id)
