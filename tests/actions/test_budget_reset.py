"""A reset clears what counts against the caps, never the record of what was charged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.actions.budget import back_off_owed, decide_charge
from orchestrator.domain.config import RecoveryConfig
from orchestrator.storage.budget import BudgetStore, TicketBudget

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_a_reset_clears_the_caps_but_keeps_the_charges(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path)
    for n in range(3):
        store.charge("T-1", "infra-retry", f"R:verdict-{n}", run_id="R", at=T0)
    store.charge("T-1", "diagnosis", "R:d-1", run_id="R", at=T0)
    budget = store.reset("T-1", by="alice", reason="provider fixed", at=T0)
    assert (budget.spent("infra-retry"), budget.spent("diagnosis")) == (0, 0)
    assert budget.resets[0].cleared == {"diagnosis": 1, "retry": 0, "infra-retry": 3}
    assert budget.has("infra-retry", "R:verdict-0")  # a key charged once stays charged
    recovery = RecoveryConfig()
    again = decide_charge(budget, key="R:verdict-0", infra=True, recovery=recovery, now=T0)
    assert again.granted and store.load("T-1").spent("infra-retry") == 0
    # The first infra retry after the reset waits the first back-off, not the fourth.
    fresh = decide_charge(budget, key="S:verdict-1", infra=True, recovery=recovery, now=T0)
    assert fresh.retry_after_s == recovery.infra_backoff_s
    store.charge("T-1", "infra-retry", "S:verdict-1", run_id="S", at=T0)
    owed = back_off_owed(
        store.load("T-1"), key="S:verdict-1", recovery=recovery, now=T0 + timedelta(seconds=10)
    )
    assert owed == recovery.infra_backoff_s - 10


def test_a_budget_file_written_before_resets_existed_still_reads(tmp_path: Path) -> None:
    old = (
        '{"ticket_id": "T-1", "charges": [{"kind": "retry", "key": "k", "run_id": "R", '
        '"at": "2026-03-01T09:00:00Z"}]}'
    )
    budget = TicketBudget.model_validate_json(old)
    assert budget.spent("retry") == 1 and budget.resets == ()
