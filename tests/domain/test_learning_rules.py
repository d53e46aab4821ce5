"""The rules of the playbook's learning (issue 44), pure: when a decision proved right,
when a learned entry's decision failed verification, and what is never learned from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.learning import (
    DecisionFacts,
    Judged,
    Lesson,
    judge,
    lesson_of,
    lessons,
)
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import Attempt, AttemptStatus, FailingCheck, ResumeRecord

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
SIGNATURE = FailureSignature(
    stage="review", check="lint", failure_class="code", lines=("error: F401 unused import",)
)


def attempt(number: int, stage: str, *, ok: bool, **more: Any) -> Attempt:
    fields: dict[str, Any] = {
        "number": number,
        "stage": stage,
        "status": AttemptStatus.FINISHED,
        "started_at": T0 + timedelta(minutes=number),
        "exit_code": 0 if ok else 1,
    }
    if not ok and "failure_class" not in more:
        fields["failure_class"] = "code"
        fields["failing_check"] = FailingCheck(
            name="lint", command=("lint",), exit_code=1, timed_out=False, log_path=None
        )
    return Attempt(**{**fields, **more})


def decision(**more: Any) -> DecisionFacts:
    fields: dict[str, Any] = {
        "number": 1,
        "attempt": 3,
        "stage": "review",
        "check": "lint",
        "source": "model",
        "action": "retry",
        "valid": True,
        "routing": "auto",
        "decided_at": T0 + timedelta(minutes=3, seconds=30),
        "outcome": "retry: re-running implement",
        "approved": True,
        "approved_by": "auto",
        "signature": SIGNATURE,
    }
    return DecisionFacts(**{**fields, **more})


# A run: clone, implement, review failed (3), the decision, implement (4), review (5).
FAILED_THEN = (
    attempt(1, "clone", ok=True),
    attempt(2, "implement", ok=True),
    attempt(3, "review", ok=False),
    attempt(4, "implement", ok=True),
)


@pytest.mark.parametrize("action", ["retry", "escalate-model", "switch-engine"])
def test_a_rerun_is_proved_by_the_failing_stage_passing_afterwards(action: str) -> None:
    attempts = (*FAILED_THEN, attempt(5, "review", ok=True))
    judged = judge(decision(action=action), attempts)
    assert judged.judged is Judged.PROVED
    assert judged.why == f"{action} green: lint passes (attempt 5)"


def test_a_rerun_is_open_until_the_stage_runs_again() -> None:
    judged = judge(decision(), FAILED_THEN)
    assert (judged.judged, judged.why) == (Judged.OPEN, "'review' has not run again since")


def test_a_rerun_whose_stage_fails_again_failed_verification() -> None:
    attempts = (*FAILED_THEN, attempt(5, "review", ok=False))
    judged = judge(decision(), attempts)
    assert (judged.judged, judged.why) == (
        Judged.FAILED,
        "retry red: lint failed again (attempt 5)",
    )


def test_an_infrastructure_failure_after_the_rerun_does_not_judge_it() -> None:
    blip = attempt(5, "review", ok=False, failure_class="network")
    assert judge(decision(), (*FAILED_THEN, blip)).judged is Judged.OPEN
    green = attempt(6, "review", ok=True)
    assert judge(decision(), (*FAILED_THEN, blip, green)).judged is Judged.PROVED


def test_an_interrupted_attempt_does_not_judge_it() -> None:
    cut = attempt(5, "review", ok=False, status=AttemptStatus.INTERRUPTED, failure_class=None)
    assert judge(decision(), (*FAILED_THEN, cut)).judged is Judged.OPEN
    red = attempt(6, "review", ok=False)
    assert judge(decision(), (*FAILED_THEN, cut, red)).judged is Judged.FAILED


def test_an_earlier_pass_of_the_stage_does_not_prove_a_later_decision() -> None:
    attempts = (attempt(1, "review", ok=True), *FAILED_THEN[1:])
    assert judge(decision(), attempts).judged is Judged.OPEN


def test_a_person_resuming_the_run_in_between_means_nothing_is_learned() -> None:
    resume = ResumeRecord(
        at=T0 + timedelta(minutes=4, seconds=30), by="alice", from_state=RunState.NEEDS_HUMAN,
        stage="implement",
    )  # fmt: skip
    attempts = (*FAILED_THEN, attempt(5, "review", ok=True))
    judged = judge(decision(), attempts, (resume,))
    assert judged.judged is Judged.NOT_LEARNED
    assert judged.why == "the run was resumed by alice before 'review' ran again"
    # A resume before the decision (it led to the failure) changes nothing.
    earlier = resume.model_copy(update={"at": T0})
    assert judge(decision(), attempts, (earlier,)).judged is Judged.PROVED


def test_a_mechanical_fix_is_judged_by_its_own_verification() -> None:
    fix = decision(action="mechanical-fix")
    green = judge(fix.model_copy(update={"outcome": "mechanical-fix green: lint passes"}), ())
    assert (green.judged, green.why) == (Judged.PROVED, "mechanical-fix green: lint passes")
    red_outcome = "mechanical-fix red (verification check 'lint' still fails (exit 1)); fell back"
    red = judge(fix.model_copy(update={"outcome": red_outcome}), ())
    assert (red.judged, red.why) == (Judged.FAILED, red_outcome)
    # What the stage does afterwards does not change it: the fix was verified on its own.
    later_red = (*FAILED_THEN, attempt(5, "review", ok=False))
    assert judge(
        fix.model_copy(update={"outcome": "mechanical-fix green: x"}), later_red
    ).judged is (Judged.PROVED)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"valid": False}, "an invalid verdict"),
        ({"action": "abandon-human"}, "abandon-human ends the ticket: nothing verifies it"),
        ({"action": "split"}, "split ends the ticket: nothing verifies it"),
        ({"source": "synthetic"}, "retry ends the ticket: nothing verifies it"),
        ({"routing": "reject"}, "routed reject: it did not run"),
        ({"approved": False}, "rejected"),
        ({"approved": None, "approved_by": None}, "no verified approval"),
    ],
)
def test_what_is_never_learned_from(change: dict[str, Any], why: str) -> None:
    attempts = (*FAILED_THEN, attempt(5, "review", ok=True))
    judged = judge(decision(**change), attempts)
    assert (judged.judged, judged.why) == (Judged.NOT_LEARNED, why)
    assert lessons([decision(**change)], attempts) == ()


def test_a_decision_not_carried_out_is_open() -> None:
    assert judge(decision(outcome=None), ()).judged is Judged.OPEN


def test_a_proved_decision_is_proposed_unless_its_signature_is_empty() -> None:
    attempts = (*FAILED_THEN, attempt(5, "review", ok=True))
    assert lessons([decision()], attempts) == (
        Lesson(verdict=1, do="propose", why="retry green: lint passes (attempt 5)"),
    )
    empty = FailureSignature(stage="review", check="lint")
    assert lessons([decision(signature=empty)], attempts) == ()
    assert lessons([decision(signature=None)], attempts) == ()


def test_a_learned_entry_agrees_when_right_and_is_retired_when_wrong() -> None:
    made = decision(source="playbook", entry="lint-retry-0123", learned=True)
    green = (*FAILED_THEN, attempt(5, "review", ok=True))
    assert lessons([made], green) == (
        Lesson(verdict=1, do="propose", why="retry green: lint passes (attempt 5)"),
    )
    red = (*FAILED_THEN, attempt(5, "review", ok=False))
    assert lessons([made], red) == (
        Lesson(
            verdict=1, do="retire", why="retry red: lint failed again (attempt 5)",
            entry="lint-retry-0123",
        ),
    )  # fmt: skip


def test_a_written_entry_is_neither_retired_nor_learned_again() -> None:
    made = decision(source="playbook", entry="commit-order-squash", learned=False)
    for outcome in ("mechanical-fix green: x", "mechanical-fix red (x); fell back"):
        fix = made.model_copy(update={"action": "mechanical-fix", "outcome": outcome})
        assert lesson_of(fix, judge(fix, ())) is None


def test_a_model_decision_that_failed_teaches_nothing() -> None:
    red = (*FAILED_THEN, attempt(5, "review", ok=False))
    assert lessons([decision()], red) == ()


def test_lessons_come_in_verdict_order_and_are_the_same_each_time() -> None:
    # Verdict 1 about attempt 3 (review), verdict 2 about attempt 5 (review again).
    first = decision(number=1, source="playbook", entry="e-1", learned=True)
    second = decision(
        number=2, attempt=5, action="mechanical-fix", outcome="mechanical-fix green: lint passes",
        decided_at=T0 + timedelta(minutes=5, seconds=30),
    )  # fmt: skip
    attempts = (*FAILED_THEN, attempt(5, "review", ok=False), attempt(6, "review", ok=True))
    once = lessons([second, first], attempts)
    assert [(x.verdict, x.do) for x in once] == [(1, "retire"), (2, "propose")]
    assert lessons([first, second], attempts) == once
