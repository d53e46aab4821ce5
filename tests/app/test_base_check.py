"""The base check end to end (issue 27): real clones, a real check, a command engine. A
base whose check is red stops the run before any engine or model; a second ticket on the
same base reads the cached result; ``on_red_base = "compare"`` counts only new failures."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from orchestrator.cli.main import main as cli_main
from orchestrator.domain.errors import EXIT_NEEDS_HUMAN
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import exit_code
from orchestrator.recovery.gateway import ScriptedGateway

from conftest import COUNTS, write_ticket
from support.harness import Harness, make_origin, write_pipeline

pytestmark = pytest.mark.slow

OLD_FAILURE = "FAILED tests/test_cards.py::test_deal - AssertionError: 4 != 5"
NEW_FAILURE = "FAILED tests/test_cards.py::test_shuffle - AssertionError: same order"
# The engine adds a failure for T-NEW only; every ticket changes a file.
ENGINE = (
    '[engines.edit]\nkind = "command"\nmodels = ["m"]\n'
    'command = ["bash", "-c", "echo $ORCH_TICKET_ID > changed.txt; '
    f"[ $ORCH_TICKET_ID != T-NEW ] || echo '{NEW_FAILURE}' >> failures.txt\"]\n"
    '[[stages]]\nname = "implement"\nengine = "edit"\n'
)


def pipeline(tmp_path: Path, on_red_base: str | None) -> Path:
    option = f'on_red_base = "{on_red_base}"\n' if on_red_base else ""
    review = (
        '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "tests"\n'
        f'writable = ["{COUNTS}"]\n'
        f'command = ["bash", "-c", "echo ran >> {COUNTS}/tests.n; cat failures.txt; '
        '[ ! -s failures.txt ]"]\n' + option
    )
    make_origin(tmp_path, {"failures.txt": OLD_FAILURE + "\n"})
    return write_pipeline(tmp_path, ENGINE + review)


def check_runs(tmp_path: Path) -> int:
    counted = tmp_path / "counts" / "tests.n"
    return len(counted.read_text().splitlines()) if counted.exists() else 0


@pytest.mark.slow
@pytest.mark.quick  # the promise: a red base costs no engine or model
def test_a_red_base_stops_before_any_engine_or_model_and_is_checked_once(
    tmp_path: Path,
) -> None:
    h = Harness(pipeline(tmp_path, None), ScriptedGateway([]))
    record = h.run(write_ticket(tmp_path / "t", "T-1"))

    assert record.state is RunState.NEEDS_HUMAN and exit_code(record) == EXIT_NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.BASE_RED
    assert "the base is red: check 'tests'" in record.halt.detail
    assert [a.stage for a in record.attempts] == ["clone"]  # no engine ran
    assert h.builds == 0 and record.verdicts == ()  # no model was even built
    assert h.budget("T-1") == (0, 0)
    handoff = Path(record.handoff or "").read_text()
    assert "the base is red" in handoff and "check `tests` exited 1" in handoff
    assert record.base_commit is not None and record.base_commit in handoff
    assert "test_deal" in handoff  # the base's failure reading
    assert "`orchestrator run TICKET_FILE --rerun`" in handoff  # what continues it
    assert check_runs(tmp_path) == 1

    # A second ticket on the same base: the cached result, the check not run again.
    again = h.run(write_ticket(tmp_path / "t", "T-2"))
    assert again.halt is not None and again.halt.reason is HaltReason.BASE_RED
    assert [a.stage for a in again.attempts] == ["clone"] and h.builds == 0
    assert check_runs(tmp_path) == 1

    shown = io.StringIO()
    with redirect_stdout(shown):
        cli_main(["--config", str(h.loaded.path), "show", again.run_id])
    assert "base_red" in shown.getvalue() and "the base is red" in shown.getvalue()


def test_compare_counts_only_failures_the_base_did_not_have(tmp_path: Path) -> None:
    h = Harness(pipeline(tmp_path, "compare"), None)
    same = h.run(write_ticket(tmp_path / "t", "T-SAME"))
    assert same.state is RunState.COMPLETED, (same.halt, h.out.getvalue())
    review = [a for a in same.attempts if a.stage == "review"]
    assert len(review) == 1 and review[0].checks[0].already_on_base
    assert review[0].checks[0].exit_code == 1  # kept as it was
    assert review[0].checks[0].failure_detail == "failures already on the base"
    assert check_runs(tmp_path) == 2  # once on the base, once on the change
    shown = io.StringIO()
    with redirect_stdout(shown):
        cli_main(["--config", str(h.loaded.path), "show", same.run_id])
    assert "check tests: exit 1, failures already on the base: passed" in shown.getvalue()
    assert f"base     main at {same.base_commit}" in shown.getvalue()

    new = h.run(write_ticket(tmp_path / "t", "T-NEW"))
    assert new.state is RunState.NEEDS_HUMAN
    failed = new.last_failed_attempt()
    assert failed is not None and failed.failing_check is not None
    assert failed.failing_check.name == "tests" and not failed.checks[0].already_on_base
    # Recovery saw the failure: a decision was taken about it (no model here: synthetic).
    assert new.halt is not None and new.halt.reason is HaltReason.NO_MODEL
    assert len(new.verdicts) == 1
    assert check_runs(tmp_path) == 3  # the base's result was read from the cache
