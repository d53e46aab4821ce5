"""The peak memory a call adds, measured in a fresh interpreter: what the benchmarks'
flat-memory targets are judged on.

VmHWM (the peak RSS of this process image, reset by exec) rather than ru_maxrss, which
can carry the peak of the process that forked us. The child imports what ``setup`` says,
reads its peak, runs ``call`` (an expression over ``ARGS``, the strings given), reads its
peak again and prints both with the call's result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
ARGS = sys.argv[2:]
{setup}

def peak_kb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")

before = peak_kb()
result = {call}
print(json.dumps({{"before_kb": before, "after_kb": peak_kb(), "result": result}}))
"""


class PeakError(Exception):
    """The child failed: no measure."""


def peak_growth(setup: str, call: str, *args: str) -> tuple[float, float, Any]:
    """(RSS before the call in MB, its growth in MB, the call's JSON-able result)."""
    child = _CHILD.format(setup=setup, call=call)
    done = subprocess.run(
        [sys.executable, "-c", child, str(ROOT), *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise PeakError(f"the RSS child failed: {done.stderr[-500:]}")
    measured = json.loads(done.stdout)
    before, after = measured["before_kb"], measured["after_kb"]
    return before / 1024, (after - before) / 1024, measured["result"]
