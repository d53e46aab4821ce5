"""What an attempt's start and end put on the run's record (``attempt_started``,
``attempt_finished``): pure, no fixtures. The run store saves what these return."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    Counters,
    RunRecord,
    StageRecord,
    StageStatus,
    attempt_finished,
    attempt_started,
)

from support.run_records import run_record

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)
LATER = AT + timedelta(minutes=5)


def run() -> RunRecord:
    return run_record(
        "T-1", AT, title="Fix it", suffix="abcd", current_stage="clone",
        counters=Counters(attempts=2),
        stages=(StageRecord(name="clone", status=StageStatus.COMPLETED),
                StageRecord(name="implement"), StageRecord(name="open-pr")),
    )  # fmt: skip


def test_a_started_attempt_is_the_next_number_running_its_stage_current() -> None:
    record, attempt = attempt_started(
        run(), "implement", engine="aider", model="", sandbox="bwrap", egress="proxy", at=LATER
    )
    assert attempt == Attempt(
        number=3, stage="implement", status=AttemptStatus.RUNNING, engine="aider",
        model=None, started_at=LATER, sandbox="bwrap", egress="proxy",
    )  # fmt: skip
    assert record.attempts == (attempt,)
    assert record.counters.attempts == 3
    assert (record.current_stage, record.updated_at) == ("implement", LATER)
    assert record.stage_status("implement") is StageStatus.RUNNING
    assert record.stage_status("clone") is StageStatus.COMPLETED


def test_a_finished_attempt_completes_or_fails_its_stage_and_keeps_a_pull_request() -> None:
    record, attempt = attempt_started(
        run(), "open-pr", engine="", model="", sandbox=None, egress=None, at=AT
    )
    passed = attempt.model_copy(update={"status": AttemptStatus.FINISHED, "exit_code": 0})
    done = attempt_finished(record, passed, pull_request="/state/pr.json", at=LATER)
    assert done.attempts == (passed,)
    assert done.stage_status("open-pr") is StageStatus.COMPLETED
    assert (done.pull_request, done.updated_at) == ("/state/pr.json", LATER)
    failed = passed.model_copy(update={"exit_code": 1})
    undone = attempt_finished(done, failed, pull_request=None, at=LATER)
    assert undone.stage_status("open-pr") is StageStatus.FAILED
    assert undone.pull_request == "/state/pr.json"  # a pull request once opened stays named
