"""``orchestrator eval`` from the command line: the table, --json, --report, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.commands import eval as eval_command
from orchestrator.cli.main import main

# What these tests prove is the command's (its table, its JSON, its report file, its
# errors), not the eval's: a few real cases (``few_cases``) are enough; the whole corpus
# is evaluated by test_offline_eval.py.


@pytest.mark.slow
def test_the_table_names_every_measure(
    few_cases: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)  # no config.toml here: the default caps apply
    assert main(["eval", "--corpus", str(few_cases)]) == 0
    table = capsys.readouterr().out
    for measure in (
        "classifier accuracy", "playbook accuracy", "model calls avoided",
        "root-cause recall in the bundle", "of padded cases", "bundle tokens p50 / p95",
    ):  # fmt: skip
        assert measure in table


@pytest.mark.slow
def test_json_and_the_report_file_hold_the_same_results(
    few_cases: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "out" / "eval.json"
    report.parent.mkdir()
    assert main(["eval", "--corpus", str(few_cases), "--json", "--report", str(report)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(report.read_text())
    assert printed == written
    summary = printed["summary"]
    assert summary["cases"] == len(printed["cases"]) == len(list(few_cases.glob("*/label.json")))
    assert summary["model_calls_made"] + summary["model_calls_avoided"] == summary["cases"]
    assert printed["live"] is None
    # The bundle text itself never goes into a report: it is for the model only.
    assert all("bundle_text" not in case for case in printed["cases"])
    squash = next(c for c in printed["cases"] if c["id"] == "commit-order-squash")
    assert squash["playbook_entry"] == "commit-order-squash"
    assert squash["model_call_made"] is False


def test_a_missing_corpus_or_a_cap_without_live_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    few_cases: Path,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--corpus", str(tmp_path / "absent")]) == 2
    assert "no corpus at" in capsys.readouterr().err
    assert main(["eval", "--corpus", str(few_cases), "--max-cost-usd", "1"]) == 2
    assert "--max-cost-usd applies to eval --live only" in capsys.readouterr().err
    assert main(["eval", "--corpus", str(few_cases), "--live"]) == 2
    assert "eval --live needs --max-cost-usd" in capsys.readouterr().err


@pytest.mark.slow
def test_a_report_that_cannot_be_written_is_a_usage_error(
    few_cases: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "no-such-dir" / "eval.json"
    assert main(["eval", "--corpus", str(few_cases), "--report", str(report)]) == 2
    assert f"cannot write the report {report}: No such file or directory" in capsys.readouterr().err


def _ci_logs_corpus(where: Path) -> Path:
    """Two ci-logs cases: a pytest failure and a rate limit."""
    for case_id, failure_class, log, cause in (
        ("01-pytest", "code", "collecting\nE   NameError: name 'x' is not defined\n1 failed\n",
         "NameError: name 'x' is not defined"),
        ("02-docker", "rate_limited",
         "docker: Error response from daemon: toomanyrequests: You have reached your pull rate "
         "limit.\r\n", "toomanyrequests: You have reached your pull rate limit."),
    ):  # fmt: skip
        (where / case_id).mkdir(parents=True)
        (where / case_id / "log.txt").write_text(log)
        label = {
            "source_url": "u", "origin": "o", "ci_system": "github-actions", "project": "p",
            "tool": case_id[3:], "family": case_id[3:], "failure_class": failure_class,
            "root_cause": [cause],
        }  # fmt: skip
        (where / case_id / "label.json").write_text(json.dumps(label))
    return where


def test_a_ci_logs_corpus_gets_the_scorecard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    corpus = _ci_logs_corpus(tmp_path / "ci-logs")
    assert main(["eval", "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "| family " in out and "| pytest " in out and "| docker " in out
    assert "first root cause in the bundle  as found 2/2" in out
    assert "padded" not in out.split("\n\n")[1]


def test_eval_pad_reports_found_and_padded_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    corpus = _ci_logs_corpus(tmp_path / "ci-logs")
    before = sorted(p.name for p in corpus.rglob("*"))
    argv = [str(corpus), "--pad", "--pad-bytes", "65536", "--seed", "5", "--json"]
    assert eval_command.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["padded"]) for c in printed["cases"]] == [
        ("01-pytest", False), ("02-docker", False), ("01-pytest", True), ("02-docker", True),
    ]  # fmt: skip
    card = printed["scorecard"]
    assert card["padded"] is True
    assert card["totals"]["cases"] == 2
    assert card["totals"]["first_root_cause_padded"] is not None
    assert printed["summary"]["padded_cases"] == 2
    assert sorted(p.name for p in corpus.rglob("*")) == before  # nothing written there


def test_pad_options_without_pad_and_a_corpus_named_twice_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    corpus = _ci_logs_corpus(tmp_path / "ci-logs")
    assert eval_command.main([str(corpus), "--seed", "3"]) == 2
    assert "--pad-bytes and --seed apply to eval --pad only" in capsys.readouterr().err
    assert eval_command.main([str(corpus), "--pad", "--pad-bytes", "0"]) == 2
    assert "--pad-bytes: between 1 and 67108864 bytes" in capsys.readouterr().err
    assert eval_command.main([str(corpus), "--corpus", str(tmp_path)]) == 2
    assert "eval: name the corpus once (DIR or --corpus DIR)" in capsys.readouterr().err
