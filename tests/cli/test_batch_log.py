"""``batch --log FILE``: everything the command prints lands in FILE, appended; FILE is
bounded (at the size limit it becomes FILE.1 when a batch starts); a log that cannot be
written is said on the real stderr, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.batch_log import logging_to
from orchestrator.cli.main import main
from orchestrator.storage.published import rotate_log as rotate


def test_rotation_keeps_one_old_log(tmp_path: Path) -> None:
    log = tmp_path / "batch.log"
    assert rotate(log, 10) is False  # nothing there yet
    log.write_text("0123456789")
    (tmp_path / "batch.log.1").write_text("older\n")

    assert rotate(log, 11) is False and log.read_text() == "0123456789"
    assert rotate(log, 10) is True

    assert not log.exists() and (tmp_path / "batch.log.1").read_text() == "0123456789"


def test_both_streams_go_to_the_log_and_come_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    log = tmp_path / "batch.log"
    log.write_text("an earlier batch\n")
    with logging_to(log):
        print("a ticket line")
        print("an error", file=sys.stderr)
    print("after")

    assert log.read_text() == "an earlier batch\na ticket line\nan error\n"
    assert capsys.readouterr().out == "after\n"


def test_a_batch_with_a_broken_config_says_so_in_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.toml").write_text("[recovery]\nenabeld = true\n")
    log = tmp_path / "batch.log"

    assert main(["batch", "--log", str(log)]) == 2

    assert capsys.readouterr() == ("", "")
    assert "enabeld" in log.read_text() and str(tmp_path / "config.toml") in log.read_text()


def test_a_log_that_cannot_be_written_is_said_where_cron_sees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["batch", "--log", str(tmp_path / "no" / "batch.log")]) == 2

    assert capsys.readouterr().err == f"batch --log: {tmp_path / 'no'} is not a directory\n"
