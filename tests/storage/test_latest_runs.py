"""Each ticket's latest run, for many tickets at once (issue 41): from one listing of
``runs/`` (a PostgreSQL storage's too: its copy of the records), never one listing per ticket, and the same answer
``latest_for_ticket`` gave ticket by ticket before: superseded runs, retries, ties in
time, a ticket whose id begins another's. A record that cannot be read (torn, another
ticket's, half-written beside its temp file) is named, never a crash, and never hides
another ticket's answer; the report built on it reads through the same damage.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.domain.errors import StateError
from orchestrator.domain.runs import RunRecord, new_run_id
from orchestrator.reports.report_reader import Selection, read_report
from orchestrator.reports.run_reader import Context
from orchestrator.storage import BatchRecord, BatchTicket
from orchestrator.storage.batch_record import write_batch_record
from orchestrator.storage.layout import RUN_ID, run_records_by_ticket
from orchestrator.storage.runs import RunStore

from support.run_records import run_record as record

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


def latest_before(runs_dir: Path, ticket_id: str) -> str | None:
    """``RunStore.latest_for_ticket`` as it was before issue 41 (a glob of ``runs/`` for
    each ticket), returning the run id: the oracle the new answers are held to."""
    best: tuple[str, Path] | None = None
    for path in sorted(runs_dir.glob(f"{ticket_id}-*.json")):
        match = RUN_ID.match(path.stem)
        if not match or match.group("ticket") != ticket_id:
            continue
        try:
            raw = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise StateError(f"{path}: {exc}") from None
        if not isinstance(raw, dict) or raw.get("ticket_id") != ticket_id:
            raise StateError(f"{path}: not a run record of {ticket_id}")
        created = str(raw.get("created_at", ""))
        if best is None or created > best[0]:
            best = (created, path)
    return best[1].stem if best else None


def state_of_a_week(root: Path) -> tuple[RunStore, list[str], dict[str, str]]:
    """A state dir with every case, the tickets to ask about, and the id of each named
    run (``older``, ``newest``, ``tie_a``, ...)."""
    store = RunStore(root)
    store.runs_dir.mkdir(parents=True)
    named: dict[str, str] = {}

    def save(name: str, each: RunRecord) -> RunRecord:
        store.save(each)
        named[name] = each.run_id
        return each

    # Retries: T-1 ran three times; the last one is its latest, whatever the save order.
    save("newest", record("T-1", AT + timedelta(hours=1)))
    save("older", record("T-1", AT))
    save("retry", record("T-1", AT + timedelta(minutes=5, microseconds=250)))
    # A tie in time: the first run id by name is the latest (as the scan of names kept it).
    save("tie_b", record("T-2", AT, suffix="0bbb"))
    save("tie_a", record("T-2", AT, suffix="0aaa"))
    # Ticket ids that begin one another, and one with a dot.
    save("t10", record("T-10", AT - timedelta(days=1)))
    save("t1.1", record("T-1.1", AT + timedelta(days=2)))
    # A torn record (a disk that filled, a copy cut short) beside a good one.
    good = save("t3_good", record("T-3", AT + timedelta(hours=2)))
    torn = store.record_path(new_run_id("T-3", AT))
    torn.write_bytes(store.record_path(good.run_id).read_bytes()[:300])
    named["t3_torn"] = torn.stem
    # A file under T-4's name that is another ticket's record.
    stray = record("T-5", AT)
    store.record_path(new_run_id("T-4", AT)).write_text(stray.model_dump_json())
    # A run being written right now: its atomic write's temp file, half-written, beside
    # the record as it was; and the files a run has besides its record.
    t6 = save("t6", record("T-6", AT))
    later = record("T-6", AT + timedelta(hours=9)).model_dump_json()
    (store.runs_dir / f".{t6.run_id}.json.0a1b2c3d-4242.abcd1234.tmp").write_text(later[:99])
    (store.runs_dir / f"{t6.run_id}.verdict-1.json").write_text("{}")
    (store.runs_dir / f"{t6.run_id}.bundle-1.json").write_text("{}")
    (store.runs_dir / f"{t6.run_id}.approval-1.json").write_text("{}")
    (store.runs_dir / t6.run_id / "logs").mkdir(parents=True)
    # Times written two ways (an offset, and Z with microseconds): compared as written.
    offset = record("T-8", AT)
    raw = json.loads(offset.model_dump_json())
    raw["created_at"] = AT.isoformat()  # 2026-12-01T03:04:05+00:00
    store.record_path(offset.run_id).write_text(json.dumps(raw))
    named["t8_offset"] = offset.run_id
    save("t8_micro", record("T-8", AT + timedelta(microseconds=1), suffix="0fff"))
    tickets = ["T-1", "T-2", "T-10", "T-1.1", "T-3", "T-4", "T-6", "T-8", "T-9"]
    return store, tickets, named


def test_the_latest_of_many_tickets_is_what_each_ticket_alone_said_before(
    tmp_path: Path,
) -> None:
    store, tickets, named = state_of_a_week(tmp_path / "state")
    found = store.latest_runs(tickets)

    for ticket in tickets:
        try:
            expected = latest_before(store.runs_dir, ticket)
        except StateError:
            assert ticket in found.unreadable and ticket not in found.run_ids, ticket
            with pytest.raises(StateError):
                store.latest_for_ticket(ticket)
            continue
        assert found.run_ids.get(ticket) == expected, ticket
        latest = store.latest_for_ticket(ticket)
        assert (latest.run_id if latest else None) == expected, ticket
    assert found.run_ids == {
        "T-1": named["newest"],
        "T-2": named["tie_a"],
        "T-10": named["t10"],
        "T-1.1": named["t1.1"],
        "T-6": named["t6"],
        "T-8": named["t8_micro"],  # "…05.000001Z" sorts after "…05+00:00", as before
    }
    assert sorted(found.unreadable) == ["T-3", "T-4"]
    assert found.unreadable["T-3"].startswith(
        f"state error: {store.record_path(named['t3_torn'])}: not valid JSON: "
    )
    assert found.unreadable["T-4"].endswith(": not a run record of T-4")
    assert store.latest_runs([]) == ({}, {})


def test_many_tickets_are_answered_from_one_listing_of_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "state")
    store.runs_dir.mkdir(parents=True)
    tickets = [f"T-{n}" for n in range(40)]
    for n, ticket in enumerate(tickets):
        for hours in range(n % 3 + 1):
            store.save(record(ticket, AT + timedelta(hours=hours)))
    listings: list[str] = []
    listdir = os.listdir

    def counted(path: Any = ".") -> list[str]:
        listings.append(str(path))
        return listdir(path)

    def no_glob(self: Path, pattern: str) -> Any:
        raise AssertionError(f"globbed {self} for {pattern!r}")

    monkeypatch.setattr(os, "listdir", counted)
    monkeypatch.setattr(Path, "glob", no_glob)
    found = store.latest_runs(tickets)
    assert listings == [str(store.runs_dir)]
    assert sorted(found.run_ids) == sorted(tickets) and not found.unreadable
    for n, ticket in enumerate(tickets):
        assert store.load(found.run_ids[ticket]).created_at == AT + timedelta(hours=n % 3)


def test_the_report_finds_superseded_runs_as_before_and_reads_through_damage(
    tmp_path: Path,
) -> None:
    store, _, named = state_of_a_week(tmp_path / "state")
    data = read_report(store.state_dir, Selection(), Context(prices={}))

    shown = {run.run_id for run in data.runs}
    expected: set[str] = set()
    for run_id in shown:
        ticket = run_id.rsplit("-", 2)[0]
        try:
            latest = latest_before(store.runs_dir, ticket)
        except StateError:
            continue  # a ticket with a damaged record keeps its runs
        if latest is not None and latest != run_id:
            expected.add(run_id)
    assert data.superseded == expected
    assert expected == {named["older"], named["retry"], named["tie_b"], named["t8_offset"]}
    assert named["t3_good"] in shown and named["t3_good"] not in data.superseded
    assert named["t3_torn"] not in shown
    [torn] = [w for w in data.warnings if named["t3_torn"] in w]
    assert "not a valid run record" in torn


def test_a_batch_report_reads_a_queued_tickets_latest_run_and_survives_a_torn_one(
    tmp_path: Path,
) -> None:
    store, _, named = state_of_a_week(tmp_path / "state")
    began = AT + timedelta(minutes=30)
    batch = BatchRecord(
        batch_id="20261201T033000Z-beef",
        started_at=began,
        tickets=(
            BatchTicket(ticket="T-2", status="completed", run_id=named["tie_b"]),
            BatchTicket(ticket="T-1", status="queued"),  # latest at +1 h: after it began
            BatchTicket(ticket="T-10", status="queued"),  # latest a day before: not its run
            BatchTicket(ticket="T-3", status="queued"),  # a torn record: latest unknown
            BatchTicket(ticket="T-9", status="queued"),  # never ran
        ),
    )
    write_batch_record(store.layout, batch)

    data = read_report(store.state_dir, Selection(batch_id=batch.batch_id), Context(prices={}))

    assert [run.run_id for run in data.runs] == [named["tie_b"], named["newest"]]
    assert data.superseded == {named["tie_b"]}
    [warning] = data.warnings
    assert warning.startswith("ticket T-3 (queued by the batch): its latest run cannot be told: ")
    assert named["t3_torn"] in warning


def test_another_machine_answers_as_this_one_from_the_runs_it_brought_down(
    pg_url: str, tmp_path: Path
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from orchestrator.storage.postgres import StateMirror, migrate

    from support.run_records import publish_record

    with psycopg.connect(pg_url) as conn:
        migrate(conn)
    store, _, _ = state_of_a_week(tmp_path / "state")
    good = ["T-1", "T-2", "T-10", "T-1.1", "T-6"]
    for ticket in good:
        for path in run_records_by_ticket(store.runs_dir, [ticket])[ticket]:
            record = RunRecord.model_validate_json(path.read_bytes())
            publish_record(pg_url, store.state_dir, record)
    there = tmp_path / "there"
    for ticket in good:  # as taking each ticket's lock there does
        StateMirror(pg_url, there).hydrate(ticket_id=ticket)
    assert RunStore(there).latest_runs([*good, "T-9"]) == store.latest_runs(good)
