"""The stores a ticket's run writes besides its record, and the ticket's lock, as the
use cases ask for them: what ``Services`` was handed, else the state dir's own files and
flock (the local mode, unchanged). A fleet worker hands in the shared state dir's stores
fenced by its claim, the ledger under the fleet's lock, and its claim as the lock."""

from __future__ import annotations

from contextlib import AbstractContextManager

from orchestrator.execution.attempts import Services
from orchestrator.storage.approvals import ApprovalKeys, SignedApprovals
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.files import FileStorage
from orchestrator.storage.protocols import Approvals, Budgets, DecisionLedger, Decisions
from orchestrator.storage.runs import ticket_lock


def decisions_of(services: Services) -> Decisions:
    if services.decisions is not None:
        return services.decisions
    return FileStorage(services.store.state_dir).decisions


def approval_keys_of(services: Services) -> ApprovalKeys:
    """The approval key as the run's own environment gives it, else the state dir's key
    file (in a fleet, the shared state dir's: one key for every machine)."""
    return ApprovalKeys.of(services.store.layout.approval_key_path, services.environ)


def approvals_of(services: Services) -> SignedApprovals:
    """The run's approvals, signed when written and verified when read."""
    store: Approvals = (
        services.approvals
        if services.approvals is not None
        else FileStorage(services.store.state_dir).approvals
    )
    return SignedApprovals(store, approval_keys_of(services))


def budgets_of(services: Services) -> Budgets:
    if services.budgets is not None:
        return services.budgets
    return BudgetStore(services.store.state_dir)


def ledger_of(services: Services) -> DecisionLedger | None:
    """The ledger handed in, or None: the caller opens the state dir's own."""
    return services.ledger


def ticket_held(services: Services, ticket_id: str) -> AbstractContextManager[None]:
    """Hold the ticket for one driver: its flock locally, the worker's claim in a fleet
    (already won, so held here without waiting). Raises TicketLocked/TicketClaimed."""
    if services.locks is not None:
        return services.locks.ticket(ticket_id)
    return ticket_lock(services.store.state_dir, ticket_id)
