"""Every ``--json`` row has exactly the fields its command's module docstring documents
(the reference pages are generated from those docstrings: they cannot drift apart)."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from test_verdicts_command import record

from orchestrator.cli.commands import doctor, runs, tickets, verdicts
from orchestrator.cli.main import main
from orchestrator.storage.decisions import write_verdict

from conftest import bash_stage, write_config, write_ticket

FIELD = re.compile(r"^- ``([\w\[\].]+)``:", re.MULTILINE)


def documented(module: ModuleType) -> set[str]:
    assert module.__doc__ is not None
    return set(FIELD.findall(module.__doc__))


def fields(row: dict[str, object]) -> set[str]:
    """The row's keys, and ``key[].sub`` for the keys of objects in a list."""
    found = set(row)
    for key, value in row.items():
        if isinstance(value, list):
            for member in value:
                assert isinstance(member, dict)
                found |= {f"{key}[].{sub}" for sub in member}
    return found


def json_rows(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(argv) in (0, 2)  # doctor exits 2 when a check fails: its JSON is the same
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows
    return rows


@pytest.fixture
def project(tmp_path: Path) -> Path:
    config = write_config(tmp_path, bash_stage("build", "exit 0"))
    write_ticket(tmp_path / "tickets", "A-1")
    assert (
        main(
            ["--config", str(config), "run", "--no-preflight", str(tmp_path / "tickets" / "A-1.md")]
        )
        == 0
    )
    return config


def test_runs(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for row in json_rows(["--config", str(project), "runs", "--json"], capsys):
        assert fields(row) == documented(runs)


def test_verdicts_are_the_tables_columns(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = "CARDS-1-20261130T010000Z-aaaa"
    at = datetime(2026, 11, 30, 1, 5, tzinfo=UTC)
    written = record(run_id, 1, source="model", action="retry", at=at, summary="run it\nagain", calls=1)  # fmt: skip
    path = project.parent / "state" / "runs" / f"{run_id}.verdict-1.json"
    write_verdict(path, written)
    [row] = json_rows(["--config", str(project), "verdicts", "--json"], capsys)
    assert fields(row) == documented(verdicts)
    assert row == {
        "when": "2026-11-30T01:05:00Z", "run_id": run_id, "number": 1, "source": "model",
        "action": "retry", "routing": "auto", "confidence": 0.8722, "calls": 1,
        "tokens": 1020, "summary": "run it again", "path": str(path),
    }  # fmt: skip


def test_tickets(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project.parent)
    for row in json_rows(["--config", str(project), "tickets", "--json"], capsys):
        assert fields(row) == documented(tickets)


def test_doctor(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [row] = json_rows(["--config", str(project), "doctor", "--json"], capsys)
    assert fields(row) == documented(doctor)


def test_the_verdicts_table_has_the_same_columns(project: Path) -> None:
    out = io.StringIO()
    state = project.parent / "state"
    run_id = "CARDS-1-20261130T010000Z-aaaa"
    at = datetime(2026, 11, 30, 1, 5, tzinfo=UTC)
    write_verdict(state / "runs" / f"{run_id}.verdict-1.json", record(run_id, 1, source="model", action="retry", at=at))  # fmt: skip
    verdicts.verdicts(state, out, action=None, source=None, since=None, as_json=False)
    header = out.getvalue().splitlines()[0].split()
    assert header == [
        "WHEN",
        "RUN",
        "#",
        "SOURCE",
        "ACTION",
        "ROUTING",
        "CONF",
        "CALLS/TOK",
        "SUMMARY",
    ]
    # Each column is named, by its JSON field, in the docstring's list.
    doc = verdicts.__doc__ or ""
    for column in header:
        assert re.search(rf"[( ]{re.escape(column)}[,)]", doc), column
