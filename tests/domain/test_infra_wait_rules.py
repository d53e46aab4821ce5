"""The pure decisions of issue 43: which stopped or waiting runs a later batch takes up,
how old an outage is and when it is too old, which infrastructure retries count against
the cap, what intake and the status comment say of a run a later batch goes on with."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.actions.budget import decide_charge, infra_retries_spent
from orchestrator.app.intake import QUEUED, SKIPPED, ended
from orchestrator.domain.config import RecoveryConfig, load_config
from orchestrator.domain.errors import ConfigError, IllegalTransition
from orchestrator.domain.infra_wait import (
    NEXT_RUN,
    infra_wait_expired,
    infra_window_start,
    left_waiting,
    outage_since,
    wait_ran_out,
    waits_out,
)
from orchestrator.domain.lifecycle import (
    HaltReason,
    RunState,
    batch_resumes,
    check_transition,
    is_terminal,
    later_batch_may_resume,
)
from orchestrator.domain.runs import Attempt, AttemptStatus, Halt, ResumeRecord
from orchestrator.domain.status_comments import status_body
from orchestrator.reports.handoff import next_steps
from orchestrator.reports.page import render_page
from orchestrator.reports.report_data import HaltView, ReportData, RunView
from orchestrator.storage import TicketBudget
from orchestrator.storage.budget import Charge

from support.notify_fixtures import run_record

T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
WAITING = Halt(reason=HaltReason.INFRA_UNAVAILABLE, stage="open-pr", detail="503 x3")
DRY = Halt(reason=HaltReason.DRY_RUN_BLOCK, stage="open-pr", detail="DRY_RUN armed")


def attempt(number: int, minute: int, failure: str | None, **more: object) -> Attempt:
    return Attempt(
        number=number, stage="open-pr", status=more.pop("status", AttemptStatus.FINISHED),
        started_at=T0 + timedelta(minutes=minute), ended_at=T0 + timedelta(minutes=minute + 1),
        exit_code=0 if failure is None else 4, failure_class=failure,
    )  # fmt: skip


@pytest.mark.parametrize("state", list(RunState))
@pytest.mark.parametrize("halt", [None, *HaltReason])
def test_which_runs_a_later_batch_takes_up(state: RunState, halt: HaltReason | None) -> None:
    later = later_batch_may_resume(state, halt)
    assert later == (
        state is RunState.WAITING_INFRA
        or (state is RunState.NEEDS_HUMAN and halt is HaltReason.DRY_RUN_BLOCK)
    )
    # DRY_RUN still armed: a waiting run is taken up (it decides its own age); a run
    # DRY_RUN stopped is not; nothing else ever is.
    assert batch_resumes(state, halt, dry_run=True) == (state is RunState.WAITING_INFRA)
    assert batch_resumes(state, halt, dry_run=False) == later


def test_waiting_infra_is_a_waiting_state_that_says_why_and_has_two_ways_out() -> None:
    assert not is_terminal(RunState.WAITING_INFRA)
    check_transition(RunState.RECOVERING, RunState.WAITING_INFRA, HaltReason.INFRA_UNAVAILABLE)
    with pytest.raises(IllegalTransition, match="needs a halt reason"):
        check_transition(RunState.RECOVERING, RunState.WAITING_INFRA, None)
    with pytest.raises(IllegalTransition):
        check_transition(RunState.RUNNING, RunState.WAITING_INFRA, HaltReason.INFRA_UNAVAILABLE)
    check_transition(RunState.WAITING_INFRA, RunState.RUNNING, None)
    check_transition(RunState.WAITING_INFRA, RunState.NEEDS_HUMAN, HaltReason.INFRA_WAIT_EXPIRED)
    with pytest.raises(IllegalTransition):
        check_transition(RunState.WAITING_INFRA, RunState.COMPLETED, None)


def test_only_the_worlds_failures_are_waited_out() -> None:
    assert [c for c in ("rate_limited", "outage", "network") if waits_out(c)] == [
        "rate_limited", "outage", "network",
    ]  # fmt: skip
    for cls in ("auth_error", "quota_exhausted", "timeout", "engine_error", "code", None):
        assert not waits_out(cls)


def test_when_the_age_runs_out() -> None:
    assert not infra_wait_expired(T0, T0 + timedelta(hours=2) - timedelta(seconds=1), 2.0)
    assert infra_wait_expired(T0, T0 + timedelta(hours=2), 2.0)
    assert infra_wait_expired(T0, T0, 0.0)  # 0: never waited across batches
    assert not infra_wait_expired(T0, T0 + timedelta(days=89), 24.0 * 90)


def test_a_wait_that_ran_out_stops_the_run_for_a_person(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[recovery]\ninfra_wait_max_h = 2\n\n[[stages]]\nname = "x"\ncommand = ["true"]\n'
    )
    loaded = load_config(config)
    record = run_record(RunState.WAITING_INFRA, halt=WAITING, updated_at=T0)
    assert wait_ran_out(record, loaded, now=T0 + timedelta(hours=2) - timedelta(seconds=1)) is None
    assert (
        wait_ran_out(
            run_record(RunState.RUNNING, updated_at=T0), loaded, now=T0 + timedelta(days=9)
        )
        is None
    )

    stopped = wait_ran_out(record, loaded, now=T0 + timedelta(hours=2, minutes=30))

    assert stopped is not None and stopped.state is RunState.NEEDS_HUMAN
    assert stopped.halt is not None and stopped.halt.reason is HaltReason.INFRA_WAIT_EXPIRED
    assert stopped.halt.stage == "open-pr" and stopped.updated_at == T0 + timedelta(
        hours=2, minutes=30
    )
    assert stopped.halt.detail == (
        "the infrastructure stayed down for 2.5 h (since 2026-12-01T03:00:00Z), longer than "
        f"[recovery] infra_wait_max_h = 2.0 in {config}; last: 503 x3. Once the forge, model "
        f"provider or network is back: `orchestrator resume {record.run_id}`"
    )


def test_an_outage_is_as_old_as_its_first_failure_since_the_run_last_made_progress() -> None:
    record = run_record(
        RunState.WAITING_INFRA, halt=WAITING,
        attempts=(
            attempt(1, 0, "outage"),  # an earlier outage, over: the stage after it passed
            attempt(2, 5, None),
            attempt(3, 10, "network"),
            attempt(4, 20, None, status=AttemptStatus.INTERRUPTED),  # passed over
            attempt(5, 30, "rate_limited"),
        ),
    )  # fmt: skip
    assert outage_since(record) == T0 + timedelta(minutes=11)
    code = record.model_copy(update={"attempts": (*record.attempts, attempt(6, 40, "code"))})
    assert outage_since(code) is None
    # A person resumed it after the wait ran out: its age starts again from there.
    resumed = record.model_copy(update={"resumes": (ResumeRecord(
        at=T0 + timedelta(minutes=25), by="alice", from_state=RunState.NEEDS_HUMAN,
        halt=Halt(reason=HaltReason.INFRA_WAIT_EXPIRED, stage="open-pr", detail="-"),
        stage="open-pr",
    ),)})  # fmt: skip
    assert outage_since(resumed) == T0 + timedelta(minutes=31)


def test_going_on_after_a_wait_starts_a_fresh_round_of_infra_retries() -> None:
    record = run_record(RunState.WAITING_INFRA, halt=WAITING, current_stage="open-pr")
    assert infra_window_start(record) is None
    at = T0 + timedelta(hours=1)

    going = left_waiting(record, at=at)

    assert (going.state, going.halt, going.current_stage) == (RunState.RUNNING, None, "open-pr")
    [entry] = going.resumes
    assert (entry.by, entry.from_state, entry.halt) == (NEXT_RUN, RunState.WAITING_INFRA, WAITING)
    assert infra_window_start(going) == at
    recovery = RecoveryConfig(max_infra_retries_per_ticket=2, infra_backoff_s=30.0)
    budget = TicketBudget(ticket_id="T-1", charges=(
        Charge(kind="infra-retry", key="r:verdict-1", run_id="r", at=T0),
        Charge(kind="infra-retry", key="r:verdict-2", run_id="r", at=T0 + timedelta(minutes=1)),
        Charge(kind="diagnosis", key="r:d-1", run_id="r", at=T0 + timedelta(minutes=2)),
    ))  # fmt: skip
    assert infra_retries_spent(budget, None) == 2
    assert infra_retries_spent(budget, at) == 0
    spent = decide_charge(budget, key="r:verdict-3", infra=True, recovery=recovery, now=at)
    assert not spent.granted and spent.refusal == "infra-retry cap spent (2/2 for this ticket)"
    fresh = decide_charge(
        budget, key="r:verdict-3", infra=True, recovery=recovery, now=at, infra_since=at
    )
    assert fresh.granted and fresh.retry_after_s == 30.0  # the back-off starts over too
    # Plain retries and diagnoses are the ticket's own: the window does not touch them.
    assert budget.spent("diagnosis") == 1


def test_intake_queues_a_run_dry_run_stopped_and_never_calls_a_resumable_stop_finished() -> None:
    dry = run_record(RunState.NEEDS_HUMAN, halt=DRY)
    assert ended(dry) == (
        QUEUED,
        f"stopped by DRY_RUN at 'open-pr' ({dry.run_id}): the first batch with DRY_RUN=false "
        "goes on from there",
    )
    red = run_record(RunState.NEEDS_HUMAN, halt=Halt(
        reason=HaltReason.BASE_RED, stage="review", detail="red"))  # fmt: skip
    assert ended(red) == (
        SKIPPED,
        f"stopped: needs-human (base_red) at 'review' ({red.run_id}); "
        f"`orchestrator resume {red.run_id}` once its cause is fixed",
    )
    done = run_record(RunState.COMPLETED)
    assert ended(done) == (SKIPPED, f"finished: completed ({done.run_id})")
    rejected = run_record(RunState.NEEDS_HUMAN, halt=Halt(
        reason=HaltReason.HUMAN_REJECTED, stage="review", detail="no"))  # fmt: skip
    assert ended(rejected)[1].startswith("finished: needs-human")
    with_pr = run_record(RunState.NEEDS_HUMAN, halt=DRY, pull_request="/s/pr.json")
    assert ended(with_pr) == (SKIPPED, "already has our pull request /s/pr.json")


def test_the_status_comment_says_what_the_next_batch_does() -> None:
    waiting = status_body(run_record(RunState.WAITING_INFRA, halt=WAITING.model_copy(
        update={"detail": "503 x3; hand-off: /srv/orch/.state/runs/x.handoff.md"})))  # fmt: skip
    assert "/srv/orch" not in waiting
    assert "**Waiting for the infrastructure** (run `T-1-20261201T030405Z-abcd` at `open-pr`)" in (
        waiting
    )
    assert "the next batch goes on from there, with this ticket's caps untouched" in waiting
    assert "`[recovery] infra_wait_max_h`" in waiting and "503 x3" in waiting
    dry = status_body(run_record(RunState.NEEDS_HUMAN, halt=DRY))
    assert "**Stopped by DRY_RUN** before a side effect" in dry and "Needs a person" not in dry
    other = status_body(run_record(RunState.NEEDS_HUMAN, halt=WAITING.model_copy(
        update={"reason": HaltReason.INFRA_WAIT_EXPIRED})))  # fmt: skip
    assert "**Needs a person**" in other and "infra_wait_expired" in other


def test_the_report_lists_a_run_the_next_batch_takes_up_as_waiting_for_nobody(
    tmp_path: Path,
) -> None:
    def view(ticket: str, state: str, halt: HaltView | None) -> RunView:
        return RunView(
            run_id=f"{ticket}-run", ticket_id=ticket, title="t", kind="bug-fix", state=state,
            current_stage="open-pr", created_at=T0, updated_at=T0, halt=halt,
        )  # fmt: skip

    data = ReportData(
        title="r", scope="all", generated_at=T0, state_dir=tmp_path, runs=(
            view("T-OUT", "waiting-infra", HaltView("infra_unavailable", "open-pr", "503")),
            view("T-DRY", "needs-human", HaltView("dry_run_block", "open-pr", "armed")),
        ),
    )  # fmt: skip
    page = render_page(data, tmp_path / "page.html")
    start = page.index('<section id="waiting"')
    section = page[start : page.index("</section>", start)]
    assert "Nothing waits for a person." in section and "Needs a person" not in section
    assert "Goes on in the next batch by itself (waiting-infra)" in section
    assert "Goes on in the next batch by itself (needs-human)" in section
    assert "infra_unavailable at open-pr: 503" in section
    stuck = replace(data, runs=(
        view("T-RED", "needs-human", HaltView("base_red", "review", "red")),
    ))  # fmt: skip
    page = render_page(stuck, tmp_path / "page.html")
    assert "Needs a person: " in page and "Goes on in the next batch" not in page


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("-1", "Input should be greater than or equal to 0 (got -1)"),
        ('"a day"', "Input should be a valid number"),
        ("3000", "Input should be less than or equal to 2160"),
    ],
)
def test_a_bad_infra_wait_max_h_names_the_key_and_the_file(
    tmp_path: Path, value: str, said: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[recovery]\ninfra_wait_max_h = {value}\n\n[[stages]]\nname = "x"\ncommand = ["true"]\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value).startswith(
        f"config error: {config}: recovery.infra_wait_max_h: {said}"
    )


def test_the_hand_off_of_a_waiting_run_says_nobody_need_act_yet() -> None:
    waiting = next_steps("infra_unavailable", "R-1", "T-1")
    assert waiting[0].startswith("- nothing yet: the next batch goes on from the failed stage")
    assert "`orchestrator resume R-1` now" in waiting[1]
    assert next_steps("infra_wait_expired", "R-1", "T-1") == [
        "- once the forge, the model provider or the network answers again: "
        "`orchestrator resume R-1` (it goes on from the stage that failed)"
    ]
