"""A playbook event's row in the ledger (issue 44): kind ``playbook``, appended by both
backends, verified by both, moved between them byte for byte, and never counted in a
decision's history (it is provenance, not an outcome). PostgreSQL on a real server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.playbook import event_row
from orchestrator.domain.failure_signature import signature_of
from orchestrator.domain.playbook import Match, PlaybookEntry, Provenance
from orchestrator.storage.ledger import Ledger, LedgerRow, inputs_hash

AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
SIGNATURE = "build/project-tests"


def entry() -> PlaybookEntry:
    signature = signature_of("build", "project-tests", "code", ["E   KeyError: 'ace'"])
    return PlaybookEntry(
        id="project-tests-retry-0a1b2c3d4e5f",
        match=Match(stage="build", check="project-tests", signature=signature.lines),
        decision={"action": "retry", "summary": "flaky"},
        provenance=(
            Provenance(
                run_id="T-1-20261207T110000Z-ab12",
                ticket_id="T-1",
                verdict=1,
                source="model",
                approved_by="alice",
                outcome="retry green",
                at=AT,
            ),
        ),
        revision=1,
    )


def decision_and_green_outcome() -> list[dict[str, Any]]:
    """A model's retry about ``SIGNATURE`` and its green outcome: one proven decision."""
    return [
        {
            "kind": "decision",
            "decision_id": "T-1:attempt-2:verdict-1",
            "ticket": "T-1",
            "run": "T-1-20261207T110000Z-ab12",
            "capability": "recover-stage",
            "inputs_hash": inputs_hash({"n": 1}),
            "model_version": "m",
            "prompt_version": "p",
            "source": "model",
            "decision": {"signature": SIGNATURE, "verdict": {"action": "retry"}},
        }
    ]


def append_all(ledger: Any) -> list[dict[str, Any]]:
    decision = ledger.append(LedgerRow(**decision_and_green_outcome()[0]))
    ledger.append_outcome(decision, "mechanical-fix green: the check passed")
    made = entry()
    rows = [
        event_row(made, "proposed", at=AT, provenance=made.provenance[0]),
        event_row(
            made.promoted(by="github:alice", at=AT),
            "promoted",
            at=AT,
            by="github:alice",
            comment_url="https://github.com/o/r/issues/1#issuecomment-9",
        ),
        event_row(
            made.promoted(by="a", at=AT).retired(reason="red", at=AT),
            "retired",
            at=AT,
            reason="red",
        ),
    ]
    return [ledger.append(row) for row in rows]


def test_the_file_ledger_keeps_playbook_rows_out_of_the_history(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")

    stored = append_all(ledger)

    assert [r["decision_id"] for r in stored] == [
        "playbook:project-tests-retry-0a1b2c3d4e5f:proposed:1",
        "playbook:project-tests-retry-0a1b2c3d4e5f:promoted:2",
        "playbook:project-tests-retry-0a1b2c3d4e5f:retired:3",
    ]
    assert [r["source"] for r in stored] == ["playbook", "human", "playbook"]
    assert stored[1]["outcome"] == "promoted by github:alice"
    assert stored[2]["outcome"] == "retired: red"
    assert ledger.verify().ok
    history = ledger.history(SIGNATURE)
    assert {a: (h.green, h.total) for a, h in history.items()} == {"retry": (1, 1)}
    assert ledger.rows_of(stored[0]["decision_id"]) == [stored[0]]


@pytest.mark.slow
def test_the_postgresql_ledger_takes_them_too(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("psycopg")
    import psycopg

    from orchestrator.storage.postgres import migrate
    from orchestrator.storage.postgres.ledger import PostgresLedger, export_ledger

    url = request.getfixturevalue("pg_url")
    with psycopg.connect(url) as conn:
        migrate(conn)
    database = PostgresLedger(url)
    stored = append_all(database)

    assert database.verify().ok
    assert {a: (h.green, h.total) for a, h in database.history(SIGNATURE).items()} == {
        "retry": (1, 1)
    }
    assert database.rows_of(stored[1]["decision_id"]) == [stored[1]]
    exported = tmp_path / "exported.jsonl"
    assert export_ledger(database, exported).ok  # the file ledger's own verify
    assert list(Ledger(exported).rows())[2:] == stored


def test_an_event_cut_short_after_its_row_appends_no_second_row(tmp_path: Path) -> None:
    from orchestrator.app.playbook import promote, store_for

    store = store_for(tmp_path)
    made = entry()
    store.write(made)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    # killed between the row and the file: the row is there, the file still says proposed
    ledger.append(event_row(made.promoted(by="bob", at=AT), "promoted", at=AT, by="bob"))

    promote(store, made.id, by="bob", at=AT, ledger=ledger)

    assert [r["decision_id"] for r in ledger.rows()] == [f"playbook:{made.id}:promoted:2"]
    now = store.get(made.id)
    assert now is not None and now.promoted_by == "bob" and now.revision == 2
