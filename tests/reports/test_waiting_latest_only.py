"""The report's "Waiting for a person" lists each ticket's latest run only: an older run
of a ticket that a rerun has since completed waits for nobody."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from orchestrator.domain.runs import RunRecord
from orchestrator.reports.metrics import render_metrics
from orchestrator.reports.page import render_page
from orchestrator.reports.report_data import latest_of_each_ticket
from orchestrator.reports.report_reader import Selection, read_report
from orchestrator.reports.run_reader import Context
from orchestrator.storage.runs import RunStore

from support.fixture_batch import FixtureBatch, run_fixture_batch

# The fixture batch runs three tickets through real stages (a few seconds).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fixture_batch(tmp_path_factory: pytest.TempPathFactory) -> FixtureBatch:
    return run_fixture_batch(tmp_path_factory.mktemp("waiting"))


def _waiting_section(fixture: FixtureBatch, selection: Selection) -> tuple[str, list[str]]:
    data = read_report(fixture.state_dir, selection, Context(prices={}))
    page = render_page(data, fixture.root / "page.html")
    start = page.index('<section id="waiting"')
    section = page[start : page.index("</section>", start)]
    return section, [run.ticket_id for run in latest_of_each_ticket(data)]


def _awaiting_gauge(fixture: FixtureBatch, selection: Selection) -> int:
    data = read_report(fixture.state_dir, selection, Context(prices={}))
    [line] = [
        line for line in render_metrics(data).splitlines()
        if line.startswith("orchestrator_batch_awaiting_approval ")
    ]  # fmt: skip
    return int(float(line.split()[-1]))


def _complete_a_rerun_of(fixture: FixtureBatch, ticket_id: str) -> str:
    """A later, completed run of ``ticket_id`` (T-OK's completed record, renamed)."""
    store = RunStore(fixture.state_dir)
    done, waiting = store.latest_for_ticket("T-OK"), store.latest_for_ticket(ticket_id)
    assert done is not None and waiting is not None
    later = waiting.created_at + timedelta(hours=1)
    run_id = f"{ticket_id}-{later:%Y%m%dT%H%M%S}Z-beef"
    raw = json.loads(store.record_path(done.run_id).read_text())
    raw.update(run_id=run_id, ticket_id=ticket_id, created_at=later.isoformat(),
               updated_at=later.isoformat())  # fmt: skip
    RunRecord.model_validate(raw)
    store.record_path(run_id).write_text(json.dumps(raw))
    return run_id


def test_an_old_run_whose_ticket_has_since_completed_is_not_listed(
    fixture_batch: FixtureBatch,
) -> None:
    by_batch = Selection(batch_id=fixture_batch.batch_id)
    before, _ = _waiting_section(fixture_batch, by_batch)
    assert "Approve or reject: " in before and ">T-FLAKY</a>" in before
    waiting_before = _awaiting_gauge(fixture_batch, by_batch)
    rerun = _complete_a_rerun_of(fixture_batch, "T-FLAKY")
    # The batch's own selection does not hold the rerun: the state dir says it is later.
    after, _ = _waiting_section(fixture_batch, by_batch)
    assert ">T-FLAKY</a>" not in after
    assert ">HOSTILE-1</a>" in after or "Needs a person" in after  # the others still wait
    assert _awaiting_gauge(fixture_batch, by_batch) == waiting_before - 1  # metrics agree
    # Every run selected: both runs are on the page, only the latest counts here.
    everything, latest = _waiting_section(fixture_batch, Selection())
    assert ">T-FLAKY</a>" not in everything
    assert latest.count("T-FLAKY") == 1
    data = read_report(fixture_batch.state_dir, Selection(), Context(prices={}))
    assert [r.run_id for r in latest_of_each_ticket(data) if r.ticket_id == "T-FLAKY"] == [rerun]
