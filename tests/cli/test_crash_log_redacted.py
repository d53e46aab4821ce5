"""A crash's traceback is kept in a file: no secret of the environment goes into it, by
value, whatever its shape (issue 40, item 3)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from orchestrator.cli import main as cli
from orchestrator.domain.errors import EXIT_BUG

TOKEN = "dpl+9fK2/mQ7xR4~vL8Zq"


def test_the_crash_log_holds_no_secret_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crash(args: object) -> int:
        encoded = base64.b64encode(TOKEN.encode()).decode()
        raise RuntimeError(f"the deploy said {TOKEN} ({encoded}) and died")

    monkeypatch.setenv("DEPLOY_TOKEN", TOKEN)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(cli, "_dispatch", crash)
    assert cli.main(["runs"]) == EXIT_BUG
    said = capsys.readouterr().err
    [path] = re.findall(r"traceback written to (\S+)", said)
    kept = Path(path).read_text()
    assert "RuntimeError: the deploy said [REDACTED] ([REDACTED]) and died" in kept, kept
    assert TOKEN not in kept
