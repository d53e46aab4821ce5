"""A batch's line for a ticket awaiting approval carries what the decision proposes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.batch.queue import awaiting_summary
from orchestrator.batch.results import TicketResult
from orchestrator.storage.runs import RunStore

from support.fixture_batch import FixtureBatch, run_fixture_batch

# The fixture batch runs three tickets through real stages (a few seconds): the slow tier.
# The quick one keeps the line's rendering, which needs no batch.
pytestmark = pytest.mark.slow

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2


@pytest.fixture(scope="module")
def fixture_batch(tmp_path_factory: pytest.TempPathFactory) -> FixtureBatch:
    return run_fixture_batch(tmp_path_factory.mktemp("awaiting"))


def test_the_summary_of_the_decision_it_waits_on(fixture_batch: FixtureBatch) -> None:
    record = RunStore(fixture_batch.state_dir).latest_for_ticket("T-FLAKY")
    assert record is not None and record.state == "awaiting-approval"
    assert awaiting_summary(record) == "the build looks flaky; run it again"
    done = RunStore(fixture_batch.state_dir).latest_for_ticket("T-OK")
    assert done is not None and awaiting_summary(done) == ""


def test_it_is_redacted_on_one_line_and_cut(fixture_batch: FixtureBatch) -> None:
    record = RunStore(fixture_batch.state_dir).latest_for_ticket("T-FLAKY")
    assert record is not None
    path = Path(record.verdicts[-1].path)
    if not path.is_absolute():
        path = Path(record.run_dir).parent.parent / path
    stored = json.loads(path.read_text())
    original = path.read_text()
    try:
        stored["verdict"]["summary"] = f"token {SECRET}\nthen " + "x" * 400
        path.write_text(json.dumps(stored))
        said = awaiting_summary(record)
    finally:
        path.write_text(original)
    assert SECRET not in said and "\n" not in said
    assert said.startswith("token ") and len(said) == 200 and said.endswith("…")


@pytest.mark.quick
def test_the_line_shows_it_after_the_command() -> None:
    result = TicketResult(
        "T-1", "awaiting-approval", "T-1-20261203T000000Z-abcd",
        "orchestrator approve T-1-20261203T000000Z-abcd", 1.5, True,
        summary="the build looks flaky; run it again",
    )  # fmt: skip
    assert result.line().endswith(
        "orchestrator approve T-1-20261203T000000Z-abcd; proposed: the build looks flaky; "
        "run it again"
    )
    assert not TicketResult("T-2", "completed", None, "", 0.1, True).line().endswith("proposed")
