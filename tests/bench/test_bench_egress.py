"""`bench/bench_egress.py --quick` runs to the end and prints every measurement and a
verdict for each target (no timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT, subprocess_env
from sandbox_required import require_sandbox


@pytest.mark.slow
def test_egress_bench_runs_and_reports_set_up_and_throughput() -> None:
    require_sandbox()
    result = subprocess.run(
        [sys.executable, "bench/bench_egress.py", "--quick"], cwd=ROOT, env=subprocess_env(),
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for part in (
        "connection set-up (connect + 1-byte request, median of 150 each):",
        "a stream paced as a model's (8 MiB/s, 4 KiB events), median of 3 rounds:",
        "32 MiB as fast as the loopback goes (no target), median of 3 rounds:",
    ):
        assert part in out, out
    assert re.search(r"^(PASS|FAIL): set-up adds [\d.]+ ms \(target <= 5.0 ms\)$", out, re.M), out
    assert re.search(r"^(PASS|FAIL): a streaming response keeps [\d.]+x", out, re.M), out
