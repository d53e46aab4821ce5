"""The index serves each action's latest outcomes for a signature, with their times, as a
scan of every row would; and a decision's confidence is given them weighted by age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.app.ledger_link import LedgerLink
from orchestrator.recovery.confidence import HALF_LIFE_DAYS
from orchestrator.storage.ledger import Ledger, recent_outcomes_by_scan

from conftest import examples
from support.ledger_rows import SIGNATURES, conclude, decide, ledger_steps, play

T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def conclude_at(ledger: Ledger, row: dict[str, Any], outcome: str, at: datetime) -> None:
    conclude(ledger, row, outcome, stamp(at))


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=ledger_steps, last=st.integers(1, 4))
def test_recent_outcomes_are_what_a_scan_computes(
    tmp_path_factory: Any, steps: Any, last: int
) -> None:
    ledger = Ledger(tmp_path_factory.mktemp("ledger") / "ledger.jsonl")
    # Outcomes an hour apart, in the order they are written, as a real ledger has them.
    play(ledger, steps, lambda i: stamp(T0 + timedelta(hours=i)))
    for signature in (*SIGNATURES, "never-seen"):
        assert ledger.recent_outcomes(signature, last) == recent_outcomes_by_scan(
            ledger.rows(), signature, last
        )
    assert ledger.verify().ok


def test_an_index_of_the_older_version_is_rebuilt_with_the_outcomes(tmp_path: Path) -> None:
    import sqlite3

    ledger = Ledger(tmp_path / "ledger.jsonl")
    row = decide(ledger, 1, "sig-a", "retry")
    conclude_at(ledger, row, "retried implement", T0)
    ledger.history("sig-a")  # the index exists
    with sqlite3.connect(ledger.index.path) as db:  # as the first version left it
        db.execute("DELETE FROM outcomes")
        db.execute("UPDATE meta SET value = '1' WHERE name = 'version'")
    found = Ledger(ledger.path).recent_outcomes("sig-a", 10)
    assert [(o.green, o.ts) for o in found["retry"]] == [(False, "2026-01-15T12:00:00Z")]


def test_a_decision_is_given_the_latest_outcomes_weighted_by_age(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    link = LedgerLink(ledger)
    old = decide(ledger, 1, "review/x/code", "mechanical-fix")
    conclude_at(ledger, old, "mechanical-fix red: x", T0)
    new = decide(ledger, 2, "review/x/code", "mechanical-fix")
    now = T0 + timedelta(days=2 * HALF_LIFE_DAYS)
    conclude_at(ledger, new, "mechanical-fix green: ok", now)
    history = link.recent_history("review/x/code", now=now)["mechanical-fix"]
    # The fresh green weighs 1, the red from two half-lives ago a quarter.
    assert (history.green, history.total) == (1.0, 1.25)
    assert link.recent_history("review/x/infra", now=now) == {}
