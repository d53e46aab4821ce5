"""A stage or check that opts out of the egress proxy (``egress = ["*"]``: the host's
whole network) is said at every start, recorded on its attempt, and marked by
``orchestrator show``; the others record what they reach (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.storage.runs import read_record_file

from conftest import bash_stage, write_config, write_ticket
from support.sandbox_required import require_sandbox


def test_a_stage_with_the_whole_network_is_warned_recorded_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_sandbox()
    config = write_config(
        tmp_path,
        bash_stage("offline", "true")
        + bash_stage("listed", "true", egress=["api.example.com"])
        + bash_stage("open", "true", egress=["*"])
        + '[[stages]]\nname = "review"\ncwd = "run"\n'
        + '[[stages.checks]]\nname = "wide"\ncommand = ["true"]\negress = ["*"]\n',
    )
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 0
    said = capsys.readouterr().out
    assert 'warning: stage open reaches the whole network (egress = ["*"] in its config)' in said
    assert "warning: check review:wide reaches the whole network" in said
    assert said.count("reaches the whole network") == 2

    [path] = (tmp_path / "state" / "runs").glob("*.json")
    record = read_record_file(path)
    assert [(a.stage, a.egress) for a in record.attempts] == [
        ("offline", "none"), ("listed", "proxy"), ("open", "open"), ("review", None),
    ]  # fmt: skip

    assert main(["--config", str(config), "show", record.run_id]) == 0
    shown = capsys.readouterr().out
    assert "#3 open [finished] (whole network)" in shown
    assert shown.count("(whole network)") == 1
