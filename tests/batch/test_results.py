"""What a batch reports, pinned without running anything: which worker's report of a
ticket wins, and which outcome decides the exit code."""

from __future__ import annotations

import json
from dataclasses import asdict

from orchestrator.batch.results import TicketResult, exit_code, merge, worker_results
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
