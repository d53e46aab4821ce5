"""The report page reads a mechanical fix's report as the record it is: a damaged one is
named, with its file and the key that is wrong, and the rest of the run is reported."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from orchestrator.cli import main as cli

from conftest import ROOT
from support.page_checks import parse

OLD_RUN = "CARDS-1-20261130T232650Z-1a8b"


def test_a_damaged_fix_report_is_named_with_its_key(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(ROOT / "tests" / "data" / "old_state", state)
    fix = state / "runs" / f"{OLD_RUN}.mechanical_fix.json"
    fix.write_text(json.dumps({**json.loads(fix.read_text()), "status": "blue"}))
    page = tmp_path / "page.html"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--state-dir", str(state), "report", "--out", str(page)])
    assert code == 0 and "report: 2 run(s)" in out.getvalue()
    said = f"state error: {fix}: not a valid mechanical-fix report: status: Input should be"
    assert f"warning: {OLD_RUN}: decision 1: {said}" in err.getvalue()
    text = parse(page.read_text()).all_text
    assert "Files that could not be read" in text and "reset --soft" not in text
