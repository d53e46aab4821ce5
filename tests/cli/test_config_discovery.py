"""Config discovery: --config and $ORCHESTRATOR_CONFIG win; else config.toml here or in
a parent (up to /, as git looks for .git), else the user's XDG config."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.discovery import candidates, discover_config
from orchestrator.cli.main import main

from conftest import bash_stage, write_config, write_ticket

HOME = {"HOME": "/home/ann"}


def test_the_working_directory_comes_first() -> None:
    present = {Path("/srv/a/b/config.toml"), Path("/srv/config.toml")}
    assert discover_config(Path("/srv/a/b"), HOME, present.__contains__) == Path(
        "/srv/a/b/config.toml"
    )


def test_then_each_parent_up_to_the_root() -> None:
    assert discover_config(Path("/srv/a/b"), HOME, {Path("/srv/config.toml")}.__contains__) == (
        Path("/srv/config.toml")
    )
    assert discover_config(Path("/srv/a/b"), HOME, {Path("/config.toml")}.__contains__) == (
        Path("/config.toml")
    )


def test_then_the_user_config_xdg_first_then_dot_config() -> None:
    user = Path("/home/ann/.config/orchestrator/config.toml")
    assert discover_config(Path("/srv/a"), HOME, {user}.__contains__) == user
    xdg = {"XDG_CONFIG_HOME": "/etc/xdg-ann", **HOME}
    assert discover_config(
        Path("/srv/a"), xdg, {Path("/etc/xdg-ann/orchestrator/config.toml")}.__contains__
    ) == Path("/etc/xdg-ann/orchestrator/config.toml")
    # A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    relative = {"XDG_CONFIG_HOME": "cfg", **HOME}
    assert candidates(Path("/srv"), relative)[-1] == user


def test_nothing_found_is_none_and_the_order_is_as_documented() -> None:
    assert discover_config(Path("/srv/a"), {}, lambda path: False) is None
    assert candidates(Path("/srv/a"), HOME) == [
        Path("/srv/a/config.toml"),
        Path("/srv/config.toml"),
        Path("/config.toml"),
        Path("/home/ann/.config/orchestrator/config.toml"),
    ]


def test_a_command_in_a_subdirectory_uses_the_parents_config_and_verbose_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "project", bash_stage("build", "exit 0"))
    ticket = write_ticket(tmp_path / "project" / "t", "A-1")
    deep = tmp_path / "project" / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nowhere"))
    assert main(["run", str(ticket)]) == 0
    capsys.readouterr()
    assert main(["runs", "-v"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"orchestrator: config {config} (found)\n"
    assert "A-1" in captured.out  # the state dir is the found config's, not ./state
    assert not (deep / "state").exists()
    # --config still wins, and -v also goes before the subcommand.
    other = write_config(tmp_path / "other", bash_stage("build", "exit 0"))
    (other.parent / "state").mkdir()
    assert main(["--verbose", "--config", str(other), "runs"]) == 0
    assert capsys.readouterr().err == f"orchestrator: config {other} (--config)\n"


def test_init_works_where_no_config_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nowhere"))
    assert main(["init"]) == 0
    assert (tmp_path / "config.toml").is_file()


def test_the_environment_variable_still_wins_over_discovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path / "here", bash_stage("build", "exit 0"))
    named = write_config(tmp_path / "named", bash_stage("build", "exit 0"))
    (named.parent / "state").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", str(named))
    assert main(["-v", "runs"]) == 0
    assert capsys.readouterr().err == f"orchestrator: config {named} ($ORCHESTRATOR_CONFIG)\n"
