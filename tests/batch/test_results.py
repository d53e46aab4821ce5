"""What a batch reports, pinned without running anything: which worker's report of a
ticket wins, and which outcome decides the exit code."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

from orchestrator.batch.results import (
    TicketResult,
    dry_run_notice,
    exit_code,
    merge,
    timestamp,
    worker_results,
)
from orchestrator.domain import errors


def result(ticket: str, status: str, *, ran: bool) -> TicketResult:
    return TicketResult(ticket, status, None, "", 0.0, ran)


def test_the_worker_that_ran_a_ticket_is_reported_over_those_that_skipped_it() -> None:
    reports = [
        result("B", "skipped", ran=False),
        result("A", "already-completed", ran=False),
        result("B", "completed", ran=True),
        result("A", "skipped", ran=False),
        result("C", "skipped", ran=False),
    ]
    merged = merge(reports)
    assert [(r.ticket, r.status) for r in merged] == [
        ("A", "already-completed"),
        ("B", "completed"),
        ("C", "skipped"),
    ]


def test_the_worst_outcome_decides_the_exit_code() -> None:
    def code(*statuses: str) -> int:
        return exit_code([result(str(i), s, ran=True) for i, s in enumerate(statuses)])

    assert code() == errors.EXIT_COMPLETED
    assert code("completed", "already-completed", "skipped", "split") == errors.EXIT_COMPLETED
    assert code("completed", "awaiting-approval") == errors.EXIT_NEEDS_HUMAN
    assert code("needs-human", "refused") == errors.EXIT_USAGE
    assert code("refused", "failed", "needs-human") == errors.EXIT_FAILED
    assert code("failed", "interrupted") == errors.EXIT_INTERRUPTED


def test_worker_results_are_read_from_among_other_output() -> None:
    done = result("T-1", "completed", ran=True)
    text = "\n".join(["a traceback line", json.dumps(asdict(done)), '{"other": 1}', "more noise"])
    assert worker_results(text) == [done]


def test_a_result_read_back_from_a_worker_is_the_result_it_wrote() -> None:
    failed = TicketResult(
        "T-2", "failed", "T-2-20261201T000000Z-abcd", "stage_failed at build", 1.5, True,
        at="2026-12-01T00:00:01Z", halt="stage_failed", error_lines=("compiling", "error: x"),
    )  # fmt: skip
    assert worker_results(json.dumps(asdict(failed))) == [failed]
    assert failed.lines() == [failed.line(), "    | compiling", "    | error: x"]
    assert failed.line().startswith("2026-12-01T00:00:01Z T-2 ")


def test_timestamps_are_utc_to_the_second() -> None:
    paris = timezone(timedelta(hours=1))
    assert timestamp(datetime(2026, 12, 1, 4, 5, 6, 789, tzinfo=paris)) == "2026-12-01T03:05:06Z"


def test_the_dry_run_line_names_only_what_this_batch_saw_blocked() -> None:
    def blocked(ticket: str, *, ran: bool) -> TicketResult:
        status = "needs-human" if ran else "already-needs-human"
        return TicketResult(ticket, status, None, "", 0.0, ran, halt="dry_run_block")

    assert (
        dry_run_notice([blocked("A", ran=False), result("B", "completed", ran=True)], "T") is None
    )
    notice = dry_run_notice(
        [blocked("A", ran=True), blocked("B", ran=False), blocked("C", ran=True)], "T"
    )
    assert notice == (
        "T DRY_RUN blocked a side-effectful stage of 2 ticket(s) (A, C): DRY_RUN is decided "
        "by the environment that runs the ticket (the batch's; with --backend celery, the "
        "worker's); the next `DRY_RUN=false orchestrator batch` continues each at the stage "
        "that stopped it, or `DRY_RUN=false orchestrator resume RUN_ID` one now"
    )
