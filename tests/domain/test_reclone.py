"""Which resumed run goes on from its first stage because its clone is not on this machine
(``clone_needed_by``), and what that records (``recloned``): pure, no fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.domain.config import StageConfig
from orchestrator.domain.errors import IllegalTransition
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    Reclone,
    RunRecord,
    StageRecord,
    StageStatus,
    VerdictRef,
    clone_needed_by,
    interrupted,
    moved_elsewhere,
    next_stage,
    recloned,
)

from support.run_records import run_record

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)
LATER = AT + timedelta(hours=1)
CLONE = "/state/runs/T-1-20261201T030405Z-abcd/clone"


def stage(name: str, cwd: str = "clone") -> StageConfig:
    return StageConfig.model_validate({"name": name, "command": ["true"], "cwd": cwd})


PIPELINE = (stage("clone", cwd="run"), stage("implement"), stage("review"), stage("open-pr"))


def attempt(number: int, name: str, exit_code: int = 0, **extra: object) -> Attempt:
    return Attempt.model_validate(
        {
            "number": number,
            "stage": name,
            "status": AttemptStatus.FINISHED,
            "started_at": AT,
            "exit_code": exit_code,
            **extra,
        }
    )


def run(
    done: tuple[str, ...],
    *,
    state: RunState = RunState.RUNNING,
    attempts: tuple[Attempt, ...] = (),
    verdicts: tuple[VerdictRef, ...] = (),
    pipeline: tuple[StageConfig, ...] = PIPELINE,
) -> RunRecord:
    stages = tuple(
        StageRecord(
            name=s.name,
            status=StageStatus.COMPLETED if s.name in done else StageStatus.PENDING,
        )
        for s in pipeline
    )
    return run_record(
        "T-1", AT, title="Fix it", suffix="abcd", run_dir=str(Path(CLONE).parent),
        clone_dir=CLONE, state=state, current_stage="review", stages=stages,
        attempts=attempts, verdicts=verdicts,
    )  # fmt: skip


def verdict(number: int, on_attempt: int, outcome: str | None) -> VerdictRef:
    return VerdictRef(
        number=number, attempt=on_attempt, source="model", action="retry",
        path=f"/v/{number}.json", outcome=outcome,
    )  # fmt: skip


IMPLEMENTED = (attempt(1, "clone"), attempt(2, "implement"))


@pytest.mark.parametrize(
    ("done", "needed_by"),
    [
        ((), None),  # a new run: the clone stage comes first and makes it
        (("clone",), "implement"),
        (("clone", "implement"), "review"),
        (("clone", "implement", "review"), "open-pr"),
        (("clone", "implement", "review", "open-pr"), None),  # nothing left to run
    ],
)
def test_the_next_stage_in_the_clone_needs_it(done: tuple[str, ...], needed_by: str | None) -> None:
    assert clone_needed_by(run(done), PIPELINE) == needed_by


def test_a_pipeline_that_never_makes_a_clone_is_not_sent_back() -> None:
    all_in_clone = (stage("implement"), stage("review"))
    assert clone_needed_by(run(("implement",), pipeline=all_in_clone), all_in_clone) is None
    all_in_run = (stage("make", cwd="run"), stage("report", cwd="run"))
    assert clone_needed_by(run(("make",), pipeline=all_in_run), all_in_run) is None


def test_a_stage_before_the_clone_goes_on_in_the_run_dir() -> None:
    pipeline = (stage("clone", cwd="run"), stage("fetch-deps", cwd="run"), stage("implement"))
    assert clone_needed_by(run(("clone",), pipeline=pipeline), pipeline) is None
    assert clone_needed_by(run(("clone", "fetch-deps"), pipeline=pipeline), pipeline) == (
        "implement"
    )


def test_a_decision_about_a_failure_in_the_clone_needs_it() -> None:
    failed = (*IMPLEMENTED, attempt(3, "review", exit_code=1))
    # Recorded failed, undecided (the worker died before deciding).
    assert clone_needed_by(run(("clone", "implement"), attempts=failed), PIPELINE) == "review"
    # Recovering, or awaiting an answer: the decision is carried out in the clone.
    for state in (RunState.RECOVERING, RunState.AWAITING_APPROVAL):
        decided = run(
            ("clone", "implement"), state=state, attempts=failed, verdicts=(verdict(1, 3, None),)
        )
        assert clone_needed_by(decided, PIPELINE) == "review"


def test_a_decided_failure_leaves_it_to_the_next_stage() -> None:
    failed = (attempt(1, "clone"), attempt(2, "implement", exit_code=1))
    retried = run(("clone",), attempts=failed, verdicts=(verdict(1, 2, "retry"),))
    assert clone_needed_by(retried, PIPELINE) == "implement"
    # A failure of the stage that makes the clone needs no clone to be decided on.
    in_clone_stage = run((), attempts=(attempt(1, "clone", exit_code=128),))
    assert clone_needed_by(in_clone_stage, PIPELINE) is None


def test_a_running_run_goes_on_from_the_first_stage_keeping_its_history() -> None:
    record = run(("clone", "implement"), attempts=IMPLEMENTED, verdicts=(verdict(1, 2, "retry"),))
    again = recloned(record, at=LATER, needed_by="review")
    assert [s.status for s in again.stages] == [StageStatus.PENDING] * 4
    assert (again.state, again.current_stage, again.updated_at) == (
        RunState.RUNNING, "clone", LATER,
    )  # fmt: skip
    assert again.attempts == record.attempts and again.verdicts == record.verdicts
    assert again.counters == record.counters
    assert again.reclones == (
        Reclone(
            at=LATER, clone_dir=CLONE, needed_by="review", from_state=RunState.RUNNING,
            from_stage="clone", after_attempt=2,
        ),
    )  # fmt: skip
    assert again.reclones[0].note() == (
        f"workspace not on this machine: the clone {CLONE} is missing and 'review' works "
        "in it; stages re-run from 'clone'"
    )
    # Sent back once: the clone stage is next now, and it makes the clone.
    assert clone_needed_by(again, PIPELINE) is None


@pytest.mark.parametrize("state", [RunState.RECOVERING, RunState.AWAITING_APPROVAL])
def test_a_decision_in_flight_is_left_as_recorded_and_not_owed_any_more(state: RunState) -> None:
    failed = (*IMPLEMENTED, attempt(3, "review", exit_code=1))
    record = run(("clone", "implement"), state=state, attempts=failed,
                 verdicts=(verdict(1, 3, None),))  # fmt: skip
    again = recloned(record, at=LATER, needed_by="review")
    assert again.state is RunState.RUNNING and again.halt is None
    assert again.verdicts == record.verdicts  # kept, not carried out
    assert again.reclones[-1].from_state is state and again.reclones[-1].after_attempt == 3
    # The failure before the reclone is not decided on again, even once it is running.
    assert clone_needed_by(again, PIPELINE) is None


def test_a_stopped_run_is_not_sent_back_by_itself() -> None:
    stopped = run(("clone", "implement"), state=RunState.COMPLETED)
    with pytest.raises(IllegalTransition, match="completed is terminal"):
        recloned(stopped, at=LATER, needed_by="review")


def test_a_record_written_before_reclones_reads_with_none() -> None:
    record = run(("clone",))
    data = record.model_dump(mode="json")
    del data["reclones"]
    assert RunRecord.model_validate(data).reclones == ()


def test_a_run_moves_only_where_its_clone_is_missing_and_needed() -> None:
    record = run(("clone", "implement"))
    assert next_stage(record, PIPELINE) == PIPELINE[2]
    assert next_stage(run(tuple(s.name for s in PIPELINE)), PIPELINE) is None
    assert moved_elsewhere(record, PIPELINE, at=LATER, clone_there=True) is None
    assert moved_elsewhere(run(()), PIPELINE, at=LATER, clone_there=False) is None

    moved = moved_elsewhere(record, PIPELINE, at=LATER, clone_there=False)

    assert moved == recloned(record, at=LATER, needed_by="review")
    assert moved is not None and next_stage(moved, PIPELINE) == PIPELINE[0]


def test_the_attempts_a_dead_run_left_running_are_interrupted_and_their_stage_pending() -> None:
    left = attempt(2, "review", status=AttemptStatus.RUNNING)
    record = run(("clone", "implement"), attempts=(attempt(1, "implement"), left))
    record = record.with_stage_status("review", StageStatus.RUNNING)

    settled = interrupted(record, at=LATER)

    assert settled.attempts[0] == record.attempts[0]
    assert (settled.attempts[1].status, settled.attempts[1].ended_at) == (
        AttemptStatus.INTERRUPTED, LATER,
    )  # fmt: skip
    assert settled.stage_status("review") is StageStatus.PENDING
    assert interrupted(settled, at=LATER + timedelta(hours=1)) == settled
