"""`bench/bench_eval.py` runs to the end over a corpus and prints every measurement and a
verdict per target (no number is asserted: the bench reports it). A few of the session's
cases, padded twins included: the whole corpus is evaluated by test_offline_eval.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, subprocess_env


@pytest.mark.slow
@pytest.mark.quick
def test_bench_eval_reports_prompt_size_and_recall(few_cases: Path) -> None:
    result = subprocess.run(
        [sys.executable, "bench/bench_eval.py", "--corpus", str(few_cases)], cwd=ROOT,
        env=subprocess_env(), capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for part in (
        "prompt tokens median (all)", "prompt tokens median (unpadded)  ",
        "prompt tokens median (padded)", "root-cause recall", "summary",
    ):  # fmt: skip
        assert part in out, out
    assert re.search(r"^  2/2 targets met$|^  [01]/2 targets met$", out, re.MULTILINE), out
    assert len(re.findall(r" (PASS|FAIL)$", out, re.MULTILINE)) == 2
