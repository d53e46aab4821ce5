"""A stage or check opted out of the sandbox is said at every start, recorded on its
attempt (or check result), and shown by ``orchestrator show``; the rest say bwrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.storage.runs import read_record_file

from conftest import bash_stage, write_config, write_ticket
from support.sandbox_required import require_sandbox


def test_an_opted_out_stage_and_check_are_warned_recorded_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_sandbox()
    config = write_config(
        tmp_path,
        bash_stage("boxed", "true")
        + bash_stage("open", "true", sandbox="none")
        + '[[stages]]\nname = "review"\ncwd = "run"\n'
        + '[[stages.checks]]\nname = "inside"\ncommand = ["true"]\n'
        + '[[stages.checks]]\nname = "outside"\ncommand = ["true"]\nsandbox = "none"\n',
    )
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 0
    said = capsys.readouterr().out
    assert 'warning: stage open runs outside the sandbox (sandbox = "none"' in said
    assert "warning: check review:outside runs outside the sandbox" in said
    assert "stage boxed runs outside" not in said and "review:inside runs outside" not in said

    [path] = (tmp_path / "state" / "runs").glob("*.json")
    record = read_record_file(path)
    assert [(a.stage, a.sandbox) for a in record.attempts] == [
        ("boxed", "bwrap"), ("open", "none"), ("review", None),
    ]  # fmt: skip
    assert [(c.name, c.sandbox) for c in record.attempts[2].checks] == [
        ("inside", "bwrap"), ("outside", "none"),
    ]  # fmt: skip

    assert main(["--config", str(config), "show", record.run_id]) == 0
    shown = capsys.readouterr().out
    assert "#2 open [finished] (unsandboxed)" in shown and "#1 boxed [finished] 2" in shown
    assert "check outside: exit 0 in" in shown and shown.count("(unsandboxed)") == 2
