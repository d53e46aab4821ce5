"""The base check's rules without a process: when it is due, and the hand-off of a red
base (what a person reads: the check, the base commit, the base's failure reading)."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.app.base_check import base_check_due
from orchestrator.domain.config import StageConfig
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    Halt,
    ResumeRecord,
    RunRecord,
    StageRecord,
)
from orchestrator.reports.handoff import render_base_red_handoff
from orchestrator.storage import BaseCheck

NOW = datetime(2026, 12, 1, tzinfo=UTC)
COMMIT = "c0ffee" + "0" * 34
ENGINE = StageConfig(name="implement", engine="edit")
COMMAND = StageConfig(name="build", command=("make",))


def record(**update: object) -> RunRecord:
    base = RunRecord(
        run_id="T-1-20261201T000000Z-abcd", ticket_id="T-1", ticket_title="Deal five",
        ticket_kind="bug-fix", ticket_path="/t/T-1.md", ticket_snapshot="/s/T-1.md",
        ticket_sha256="0" * 64, repository="/srv/cards.git", base_branch="main",
        work_branch="orch/T-1", config_path="/c.toml", config_sha256="0" * 64,
        run_dir="/s/runs/T-1-20261201T000000Z-abcd",
        clone_dir="/s/runs/T-1-20261201T000000Z-abcd/clone", created_at=NOW, updated_at=NOW,
        stages=(StageRecord(name="clone"), StageRecord(name="implement")),
    )  # fmt: skip
    return base.model_copy(update=update)


def attempt(number: int, stage: str, engine: str | None = None) -> Attempt:
    return Attempt(
        number=number, stage=stage, status=AttemptStatus.FINISHED, engine=engine,
        started_at=NOW, exit_code=0,
    )  # fmt: skip


def test_the_base_is_checked_before_the_first_engine_only() -> None:
    fresh = record(attempts=(attempt(1, "clone"),))
    assert base_check_due(fresh, ENGINE)
    assert not base_check_due(fresh, COMMAND)  # not an engine stage
    # The engine has touched the clone: it is no longer at the base.
    assert not base_check_due(
        record(attempts=(attempt(1, "clone"), attempt(2, "implement", "edit"))), ENGINE
    )


def test_a_person_who_resumed_past_a_red_base_is_not_stopped_by_it_again() -> None:
    halt = Halt(reason=HaltReason.BASE_RED, stage="review", detail="the base is red")
    resumed = ResumeRecord(at=NOW, by="ann", from_state=RunState.NEEDS_HUMAN, halt=halt, stage="x")
    assert not base_check_due(record(resumes=(resumed,)), ENGINE)
    other = resumed.model_copy(update={"halt": halt.model_copy(update={"reason": "timed_out"})})
    assert base_check_due(record(resumes=(other,)), ENGINE)


def test_the_hand_off_of_a_red_base_names_the_check_the_commit_and_its_reading() -> None:
    red = BaseCheck(
        repository="/srv/cards.git", commit=COMMIT, check="tests", digest="0" * 16,
        passed=False, exit_code=1, reading=">3| FAILED tests/test_cards.py::test_deal",
        log_path="/s/base_checks/x/tests.log", checked_at=NOW,
    )  # fmt: skip
    text = render_base_red_handoff(record(), [red])
    assert "**Why:** the base is red" in text
    assert f"base commit `{COMMIT}` of branch `main`" in text
    assert "### check `tests` exited 1" in text
    assert "    >3| FAILED tests/test_cards.py::test_deal" in text
    assert "- log: `/s/base_checks/x/tests.log`" in text
