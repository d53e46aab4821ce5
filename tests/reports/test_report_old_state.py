"""The report reads what older versions wrote, and what a damaged state dir still holds:
a state dir from before the numbered mechanical-fix reports and the batch records (its
records name paths on the machine that wrote them), and one whose verdict file was
damaged after the fact."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

from orchestrator.cli import main as cli

from conftest import ROOT
from support.page_checks import check_links, parse

OLD_STATE = ROOT / "tests" / "data" / "old_state"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_an_older_state_dir_is_reported_with_what_it_recorded(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(OLD_STATE, state)
    page = tmp_path / "old.html"
    code, out, err = run_cli("--state-dir", str(state), "report", "--out", str(page))
    assert (code, err) == (0, ""), err
    assert "report: 2 run(s) (every run)" in out
    parsed = parse(page.read_text())
    linked = check_links(page, parsed)
    text = parsed.all_text
    for run_id in ("CARDS-1-20261130T232650Z-1a8b", "CARDS-3-20261130T232652Z-6de1"):
        assert f"run-{run_id}" in parsed.ids
    # The recipe, from the one report older runs kept (``<run>.mechanical_fix.json``).
    assert "reset --soft 'HEAD~1'" in text and "→ green" in text
    # The records name files on the machine that wrote them: found beside the record
    # instead, and the logs that are not here are said to be missing, not linked.
    assert (state / "runs" / "CARDS-3-20261130T232652Z-6de1.verdict-2.json").resolve() in linked
    assert (state / "runs" / "CARDS-3-20261130T232652Z-6de1.handoff.md").resolve() in linked
    assert "log missing: /tmp/h1old/w/mstate/runs/" in text
    assert all(p.is_relative_to(state.resolve()) for p in linked)


def test_a_damaged_verdict_file_is_named_and_the_rest_is_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(OLD_STATE, state)
    damaged = state / "runs" / "CARDS-3-20261130T232652Z-6de1.verdict-1.json"
    damaged.write_text('{"half": ')
    page = tmp_path / "damaged.html"
    code, out, err = run_cli("--state-dir", str(state), "report", "--out", str(page))
    assert code == 0 and "report: 2 run(s)" in out
    assert f"warning: CARDS-3-20261130T232652Z-6de1: decision 1: state error: {damaged}" in err
    text = parse(page.read_text()).all_text
    assert "Files that could not be read" in text and str(damaged) in text
    # Its spend is unknown now: the run's and the report's cost say so rather than $0.
    assert "estimated cost not recorded" in text
