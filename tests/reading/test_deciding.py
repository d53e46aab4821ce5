"""A failure's deciding lines (issue 44) leave out the runner's own lines: a command line
that holds the words its failure prints is the config, not the failure."""

from __future__ import annotations

from pathlib import Path

from orchestrator.domain.config import ContextLimits
from orchestrator.reading.deciding import deciding_lines


def test_the_runners_command_line_is_not_a_deciding_line(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(
        "# orchestrator: 2026-12-07T12:00:00+00:00 cwd=/tmp/run/clone\n"
        "# $ bash -c 'echo error: deal dealt 3 cards, expected 4; exit 1'"
        " # sandbox: bwrap, no network\n"
        "error: deal dealt 3 cards, expected 4\n"
    )
    lines = deciding_lines(log, failure_class="code", detail=None, limits=ContextLimits())
    assert lines == ("error: deal dealt 3 cards, expected 4",)
