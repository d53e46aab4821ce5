"""``orchestrator eval`` from the command line: the table, --json, --report, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.main import main


def test_the_table_names_every_measure(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)  # no config.toml here: the default caps apply
    assert main(["eval", "--corpus", str(corpus_dir)]) == 0
    table = capsys.readouterr().out
    for measure in (
        "classifier accuracy", "playbook accuracy", "model calls avoided",
        "root-cause recall in the bundle", "of padded cases", "bundle tokens p50 / p95",
    ):  # fmt: skip
        assert measure in table


def test_json_and_the_report_file_hold_the_same_results(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "out" / "eval.json"
    report.parent.mkdir()
    assert main(["eval", "--corpus", str(corpus_dir), "--json", "--report", str(report)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(report.read_text())
    assert printed == written
    summary = printed["summary"]
    assert summary["cases"] == len(printed["cases"]) == len(list(corpus_dir.glob("*/label.json")))
    assert summary["model_calls_made"] + summary["model_calls_avoided"] == summary["cases"]
    assert printed["live"] is None
    # The bundle text itself never goes into a report: it is for the model only.
    assert all("bundle_text" not in case for case in printed["cases"])
    squash = next(c for c in printed["cases"] if c["id"] == "commit-order-squash")
    assert squash["playbook_entry"] == "commit-order-squash"
    assert squash["model_call_made"] is False


def test_a_missing_corpus_or_a_cap_without_live_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    corpus_dir: Path,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--corpus", str(tmp_path / "absent")]) == 2
    assert "no corpus at" in capsys.readouterr().err
    assert main(["eval", "--corpus", str(corpus_dir), "--max-cost-usd", "1"]) == 2
    assert "--max-cost-usd applies to eval --live only" in capsys.readouterr().err
    assert main(["eval", "--corpus", str(corpus_dir), "--live"]) == 2
    assert "eval --live needs --max-cost-usd" in capsys.readouterr().err


def test_a_report_that_cannot_be_written_is_a_usage_error(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "no-such-dir" / "eval.json"
    assert main(["eval", "--corpus", str(corpus_dir), "--report", str(report)]) == 2
    assert f"cannot write the report {report}: No such file or directory" in capsys.readouterr().err
