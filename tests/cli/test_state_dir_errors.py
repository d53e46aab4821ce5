"""A state dir that is a file, or that a read command finds missing, is a usage error
(exit 2, one line), not a crash nor an empty listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.main import main

from conftest import bash_stage, write_config, write_ticket

READERS = [["runs"], ["show", "A-1"], ["verdicts"], ["ledger", "show"], ["report"]]


@pytest.mark.parametrize(
    "argv",
    [
        *READERS,
        ["run", "--no-preflight", "TICKET"],
        ["batch", "--no-preflight"],
        ["prune", "--older-than", "1d"],
    ],
)
def test_a_state_dir_that_is_a_file_is_refused(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, bash_stage("build", "exit 0"))
    ticket = write_ticket(tmp_path / "t", "A-1")
    (tmp_path / "afile").write_text("not a directory\n")
    argv = [str(ticket) if a == "TICKET" else a for a in argv]
    assert main(["--config", str(config), "--state-dir", str(tmp_path / "afile"), *argv]) == 2
    assert capsys.readouterr().err == f"state dir {tmp_path / 'afile'} is not a directory\n"


def test_the_configs_state_dir_under_a_file_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, bash_stage("build", "exit 0"))
    (tmp_path / "state").write_text("")
    config.write_text(config.read_text().replace('state_dir = "state"', 'state_dir = "state/x"'))
    assert (
        main(["--config", str(config), "run", "--no-preflight", str(write_ticket(tmp_path / "t"))])
        == 2
    )
    assert capsys.readouterr().err == (
        f"state dir {tmp_path / 'state' / 'x'}: {tmp_path / 'state'} is not a directory\n"
    )


@pytest.mark.parametrize("argv", READERS)
def test_a_read_command_says_a_missing_state_dir_does_not_exist(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, bash_stage("build", "exit 0"))
    missing = tmp_path / "typo"
    assert main(["--config", str(config), "--state-dir", str(missing), *argv]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"state dir {missing} does not exist\n")
    assert not missing.exists()


def test_run_still_creates_a_missing_state_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, bash_stage("build", "exit 0"))
    fresh = tmp_path / "fresh" / "state"
    ticket = write_ticket(tmp_path / "t", "A-1")
    assert main(["--config", str(config), "--state-dir", str(fresh), "run", str(ticket)]) == 0
    assert (fresh / "runs").is_dir()
