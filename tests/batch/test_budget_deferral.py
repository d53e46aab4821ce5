"""A ticket the batch's model budget could not pay for waits for the next batch: its run
stays open (not ``needs-human``), nothing is charged to it, and the next batch, with a
fresh budget, decides it without repeating the stages that had finished."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from orchestrator.cli.commands.batch import batch
from orchestrator.domain.lifecycle import RunState
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.runs import RunStore

from conftest import untimed, write_ticket
from support.harness import SameAnswerModel

pytestmark = pytest.mark.slow

PIPELINE = (
    "[batch]\nmax_model_calls = 1\n[routing]\nretry = 0.0\n"
    '[[stages]]\nname = "clone"\ncwd = "run"\nwritable = ["{root}/counts"]\n'
    'command = ["bash", "-c", "echo x >> {root}/counts/clone-$ORCH_TICKET_ID; git init -q clone"]\n'
    # Fails the first time it runs for each ticket, passes after.
    '[[stages]]\nname = "build"\nwritable = ["{root}/counts"]\n'
    'command = ["bash", "-c", "f={root}/counts/build-$ORCH_TICKET_ID; echo x >> $f; '
    '[ $(wc -l < $f) -ge 2 ]"]\n'
)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.quick
def test_a_ticket_the_budget_could_not_pay_for_is_decided_by_the_next_batch(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('state_dir = "state"\n' + PIPELINE)
    tickets = tmp_path / "tickets"
    for ticket_id in ("T-00", "T-01"):
        write_ticket(tickets, ticket_id)
    state = tmp_path / "state"
    gateway = SameAnswerModel({"action": "retry", "summary": "flaky build"})

    def run_batch() -> tuple[int, str]:
        out = io.StringIO()
        code = batch(
            config, None, tickets, jobs=1, as_json=False, worker=False, out=out,
            environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
            gateway_factory=lambda: gateway,
        )  # fmt: skip
        return code, out.getvalue()

    code, out = run_batch()
    assert gateway.calls == 1
    [deferred] = [line for line in untimed(out) if line.startswith("T-01")]
    assert "deferred" in deferred and "next batch" in deferred
    assert code == 0, out  # nothing failed and nobody is needed: the next batch goes on
    record = RunStore(state).latest_for_ticket("T-01")
    assert record is not None and record.state is RunState.RECOVERING and not record.verdicts
    assert BudgetStore(state).load("T-01").charges == ()  # nothing was charged for it

    code, out = run_batch()
    assert code == 0, out
    assert gateway.calls == 2
    again = RunStore(state).latest_for_ticket("T-01")
    assert again is not None and again.run_id == record.run_id
    assert again.state is RunState.COMPLETED
    assert [v.source for v in again.verdicts] == ["model"]
    assert (
        lines(state.parent / "counts" / "clone-T-01") == 1
    )  # the finished stage was not run again
    assert (
        lines(state.parent / "counts" / "build-T-01") == 2
    )  # the failed attempt, then the decided retry
    budget = BudgetStore(state).load("T-01")
    assert (budget.spent("diagnosis"), budget.spent("retry")) == (1, 1)
    assert any(line.startswith("T-00") and "already-completed" in line for line in untimed(out))
