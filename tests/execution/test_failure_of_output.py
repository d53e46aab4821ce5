"""What a failed stage or check's log names, read from the log file as the runner wrote
it: the class, and a detail that never carries a secret the output printed."""

from __future__ import annotations

from pathlib import Path

from orchestrator.engines.base import FailureClass
from orchestrator.execution.engine_stage import failure_of_output

TOKEN = "ghp_0123456789abcdefABCDEF0123456789abcd"


def test_the_recognised_line_is_redacted_before_it_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "003-review-fetch.log"
    log.write_text(
        "# orchestrator: 2026-01-01T00:00:00+00:00 cwd=/clone\n"
        "# $ git fetch\n"
        f"fatal: unable to access 'https://bob:{TOKEN}@github.com/x.git/': Could not resolve "
        "host: github.com\n"
        "# orchestrator: exit 128 after 0.2s\n"
    )
    named = failure_of_output(log, exit_code=128, timed_out=False)
    assert named is not None and named.failure is FailureClass.NETWORK
    assert named.detail is not None
    assert TOKEN not in named.detail and "[REDACTED]" in named.detail
    assert named.detail.endswith("Could not resolve host: github.com")


def test_a_missing_log_names_nothing_and_a_timeout_is_not_read(tmp_path: Path) -> None:
    assert failure_of_output(tmp_path / "gone.log", exit_code=1, timed_out=False) is None
    log = tmp_path / "x.log"
    log.write_text("bash: line 1: 77 Killed   python big.py\n")
    assert failure_of_output(log, exit_code=137, timed_out=True) is None
    named = failure_of_output(log, exit_code=137, timed_out=False)
    assert named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED
