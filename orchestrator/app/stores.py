"""A run's approvals as the use cases read and write them: the store ``Services.storage``
hands out (the state dir's files locally; in a fleet, the shared state dir's, fenced by
the worker's claim), signed when written and verified when read with the approval key."""

from __future__ import annotations

from orchestrator.app.services import Services
from orchestrator.storage.approvals import ApprovalKeys, SignedApprovals


def approval_keys_of(services: Services) -> ApprovalKeys:
    """The approval key as the run's own environment gives it, else the state dir's key
    file (in a fleet, the shared state dir's: one key for every machine)."""
    return ApprovalKeys.of(services.storage.runs.layout.approval_key_path, services.environ)


def approvals_of(services: Services) -> SignedApprovals:
    """The run's approvals, signed when written and verified when read."""
    return SignedApprovals(services.storage.approvals, approval_keys_of(services))
