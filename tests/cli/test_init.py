"""``orchestrator init``: a commented starter config.toml and a tickets/ directory, here."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from orchestrator import starter
from orchestrator.cli.main import main
from orchestrator.domain.config import load_config
from orchestrator.domain.tickets import load_ticket

from conftest import ROOT


def test_the_repository_config_is_the_packaged_default() -> None:
    """One default pipeline: what ``init`` writes and the demo runs is the checkout's."""
    assert (ROOT / "config.toml").read_text() == starter.config_text()


def test_init_writes_a_valid_commented_config_and_an_example_ticket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    config = tmp_path / "config.toml"
    example = tmp_path / "tickets" / "EXAMPLE-1.md.example"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        ".state",
        "config.toml",
        "orchestrator.env",
        "tickets",
        "tickets/EXAMPLE-1.md.example",
    ]
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {config}\nwrote {example}\n")
    text = config.read_text()
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 5
    loaded = load_config(config)
    assert [s.name for s in loaded.config.stages] == ["clone", "implement", "review", "open-pr"]
    # The example is a valid ticket once renamed to .md (batch queues only *.md).
    shutil.copy(example, tmp_path / "tickets" / "EXAMPLE-1.md")
    ticket = load_ticket(tmp_path / "tickets" / "EXAMPLE-1.md")
    assert ticket.id == "EXAMPLE-1"


def test_init_refuses_to_overwrite_a_config_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('state_dir = "mine"\n')
    mine = tmp_path / "tickets" / "MINE-1.md"
    mine.parent.mkdir()
    mine.write_text("my ticket\n")
    assert main(["init"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"init: {config} already exists; pass --force to overwrite it "
        "(your tickets/ are never touched)\n"
    )
    assert captured.out == ""
    assert config.read_text() == 'state_dir = "mine"\n'
    assert sorted(p.name for p in mine.parent.iterdir()) == ["MINE-1.md"]

    assert main(["init", "--force"]) == 0
    assert config.read_text() == starter.config_text()
    assert mine.read_text() == "my ticket\n"
    assert sorted(p.name for p in mine.parent.iterdir()) == ["EXAMPLE-1.md.example", "MINE-1.md"]


def test_init_refuses_a_tickets_path_that_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tickets").write_text("not a directory")
    assert main(["init"]) == 2
    assert capsys.readouterr().err == f"init: {tmp_path / 'tickets'} is not a directory\n"
    assert not (tmp_path / "config.toml").exists()


def uncommented_examples(text: str) -> tuple[str, int]:
    """``text`` with its commented-out ``[[sources]]`` and ``[[notify]]`` examples made
    live: each block from its ``# [[…]]`` line through the ``# key = value`` lines under
    it; and how many blocks there were."""
    lines, blocks, in_block = [], 0, False
    for line in text.splitlines():
        if line in ("# [[sources]]", "# [[notify]]"):
            blocks, in_block = blocks + 1, True
            lines.append(line[2:])
        elif in_block and re.match(r"# [a-z_]+ = ", line):
            lines.append(line[2:])
        else:
            in_block = False
            lines.append(line)
    return "\n".join(lines) + "\n", blocks


def test_the_starters_commented_source_and_notify_examples_load_once_uncommented(
    tmp_path: Path,
) -> None:
    """The examples cannot rot: uncommented, the starter still loads, with them in it."""
    text, blocks = uncommented_examples(starter.config_text())
    assert blocks == 5
    config = tmp_path / "config.toml"
    config.write_text(text)
    loaded = load_config(config)
    assert [s.kind for s in loaded.config.sources] == ["github", "gitlab"]
    assert [t.kind for t in loaded.config.notify] == ["slack", "webhook", "email"]
    assert [t.name for t in loaded.config.notify] == [
        "slack $SLACK_WEBHOOK_URL",
        "webhook $ORCHESTRATOR_WEBHOOK_URL",
        "email to team@example.org",
    ]
    # Only the examples changed: the pipeline is the starter's.
    assert [s.name for s in loaded.config.stages] == ["clone", "implement", "review", "open-pr"]
