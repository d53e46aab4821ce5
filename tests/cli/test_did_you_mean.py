"""A mistyped subcommand, config key or ticket/run id names the closest known one."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.main import main

from conftest import bash_stage, write_config, write_ticket


def test_an_unknown_subcommand_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bach"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("orchestrator: error: argument COMMAND: invalid choice: 'bach'")
    assert last.endswith("; did you mean 'batch'?")


def test_a_mistyped_choice_of_a_subcommand_is_suggested_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["batch", "--backend", "celry"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith("did you mean 'celery'?")


def test_nothing_close_adds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


def test_an_unknown_config_key_names_the_key_at_its_own_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        bash_stage("build", "exit 0", timout_s=5),
        header="stat_dir = 'x'\n[recovery]\nmax_retris_per_ticket = 1\n",
    )
    config.write_text(config.read_text().replace("[recovery]\nenabled", "enabled", 1))
    assert main(["--config", str(config), "doctor"]) == 2
    err = capsys.readouterr()
    text = err.err + err.out
    assert "stat_dir: unknown key (not allowed here); did you mean 'state_dir'?" in text
    assert (
        "recovery.max_retris_per_ticket: unknown key (not allowed here); "
        "did you mean 'max_retries_per_ticket'?"
    ) in text
    assert "stages[0].timout_s: unknown key (not allowed here); did you mean 'timeout_s'?" in text


def test_an_unknown_ticket_or_run_id_suggests_recorded_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, bash_stage("build", "exit 1"))
    ticket = write_ticket(tmp_path / "t", "BUG-12")
    assert main(["--config", str(config), "run", str(ticket)]) == 4
    run_id = next((tmp_path / "state" / "runs").glob("BUG-12-*.json")).stem
    capsys.readouterr()
    assert main(["--config", str(config), "show", "BUG-21"]) == 7
    assert capsys.readouterr().err.endswith("; did you mean 'BUG-12'?\n")
    typo = run_id[:-1] + ("0" if run_id[-1] != "0" else "1")
    assert main(["--config", str(config), "show", typo]) == 7
    assert capsys.readouterr().err.endswith(f"; did you mean {run_id!r}?\n")
    assert main(["--config", str(config), "show", "ZZZZZZZZ"]) == 7
    assert "did you mean" not in capsys.readouterr().err
