"""``orchestrator runs`` reads only the head of each record the store wrote (issue 41: a
week of cron's thousands of records), and lists exactly what parsing each whole record
listed: the same lines, the same warnings, for records laid out otherwise (compact,
reordered, written by hand) and for damaged ones (cut short, not JSON, missing fields)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli.commands.runs import COLUMNS, runs
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Halt, RunRecord, new_run_id
from orchestrator.storage.layout import run_record_paths
from orchestrator.storage.run_listing import read_run_header
from orchestrator.storage.runs import RunStore

from support.run_records import run_record

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


def record(ticket_id: str, created: datetime, **update: Any) -> RunRecord:
    # A title with what the head's reader looks for: it must not be fooled by it.
    return run_record(ticket_id, created, title='a "quoted"\n title, with "stages": [', **update)


def listed_before(state_dir: Path) -> tuple[str, str]:
    """``runs`` as it was before issue 41 (each record parsed whole): the oracle."""
    out, errors = io.StringIO(), io.StringIO()
    headers = []
    for path in run_record_paths(state_dir / "runs"):
        try:
            raw = json.loads(path.read_bytes())
            if not isinstance(raw, dict) or not all(k in raw for k in COLUMNS):
                raise ValueError("missing run record fields")
        except (OSError, ValueError) as exc:
            print(f"warning: {path}: unreadable run record: {exc}", file=errors)
            continue
        headers.append(raw)
    headers.sort(key=lambda r: str(r.get("created_at", "")))
    for raw in headers:
        out.write(json.dumps({k: raw.get(k) for k in (*COLUMNS, "created_at")}) + "\n")
    return out.getvalue(), errors.getvalue()


def test_runs_lists_what_parsing_every_whole_record_listed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "state")
    store.runs_dir.mkdir(parents=True)
    halted = Halt(reason=HaltReason.STAGE_FAILED, stage="implement", detail="exit 1")
    for n in range(6):
        store.save(record(f"T-{n}", AT + timedelta(minutes=n), state=RunState.FAILED, halt=halted))
    store.save(record("T-9", AT - timedelta(days=1), current_stage="implement"))

    def write(name: str, text: str) -> None:
        (store.runs_dir / f"{new_run_id(name, AT)}.json").write_text(text)

    stored = json.loads(record("C-1", AT).model_dump_json())
    write("C-1", json.dumps(stored))  # compact, as a script writes it
    reordered = {"stages": stored["stages"], **stored}  # the head is before "stages"
    write("C-2", json.dumps(reordered, indent=2))
    cut = record("C-3", AT).model_dump_json(indent=2)
    write("C-3", cut[: cut.index('"attempts"')])  # cut short after its head
    write("C-4", cut.replace('"state"', '"status"'))  # a field missing
    write("C-5", "not json at all")
    write("C-6", "[1, 2]")
    no_created = json.loads(cut)
    del no_created["created_at"]
    write("C-7", json.dumps(no_created, indent=2))  # listed, sorted first, as before

    expected_out, expected_errors = listed_before(store.state_dir)
    out, errors = io.StringIO(), io.StringIO()
    assert runs(store.state_dir, out, as_json=True, errors=errors) == 0
    assert out.getvalue() == expected_out
    assert errors.getvalue() == expected_errors
    assert expected_errors.count("warning: ") == 4  # C-3 to C-6
    assert len(expected_out.splitlines()) == 7 + 3  # T-0..5, T-9, C-1, C-2, C-7


def test_a_record_as_the_store_writes_it_is_read_from_its_head(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    text = record("T-1", AT, state=RunState.COMPLETED).model_dump_json(indent=2)
    # What follows the head is not even parsed: a head-only read answers the same.
    path.write_text(text)
    head = read_run_header(str(path), COLUMNS)
    assert head == {k: v for k, v in json.loads(text).items() if k in head}
    assert "stages" not in head and "attempts" not in head
    assert {k: head[k] for k in COLUMNS} == {k: json.loads(text)[k] for k in COLUMNS}
    path.write_text(text[:-1])  # cut short by one byte: parsed whole, and refused
    with pytest.raises(ValueError):
        read_run_header(str(path), COLUMNS)
