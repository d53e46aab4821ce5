"""Every store a fleet worker's ticket run writes, assembled from one claim: the shared
state dir's file stores, each write fenced by the claim, and the ledger under the fleet's
Redis lock. This is what the ticket driver is handed in the distributed mode, in place
of the stores it opens from the state dir locally. Approvals are kept as given here and
signed and verified by the run (``app/stores.approvals_of``) with the shared state dir's
approval key, the same key on every machine and for ``orchestrator approve``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.distributed.client import CoordinationStore
from orchestrator.distributed.coordination import Claim
from orchestrator.distributed.fenced_stores import (
    FencedApprovals,
    FencedBudgets,
    FencedDecisions,
    FencedRuns,
    FencedRunStore,
)
from orchestrator.distributed.fleet_ledger import FleetLedger
from orchestrator.distributed.ledger_lock import ledger_lock

if TYPE_CHECKING:
    from orchestrator.storage.files import FileStorage
    from orchestrator.storage.protocols import Approvals, Budgets, DecisionLedger, Decisions, Runs
    from orchestrator.storage.runs import RunStore


@dataclass(frozen=True)
class FleetStores:
    runs: Runs
    decisions: Decisions
    approvals: Approvals
    budgets: Budgets
    ledger: DecisionLedger
    # The same runs as ``runs``, as the driver's ``Services.store`` is typed.
    run_store: RunStore


def fleet_stores(
    storage: FileStorage, claim: Claim, store: CoordinationStore, *, ledger_key: bytes | None
) -> FleetStores:
    """The stores of the claimed ticket's run on the shared ``storage``."""
    fence = claim.fence
    return FleetStores(
        runs=FencedRuns(storage.runs, fence),
        decisions=FencedDecisions(storage.decisions, fence),
        approvals=FencedApprovals(storage.approvals, fence),
        budgets=FencedBudgets(storage.budgets, fence),
        ledger=FleetLedger(storage.ledger(ledger_key), ledger_lock(store), fence),
        run_store=FencedRunStore(storage.root, fence),
    )
