"""Benchmark: the preflight (``orchestrator doctor``, and the checks before a run's first
stage) on the default config, without the forge request.

    python bench/bench_preflight.py           # 15 fresh interpreters of each kind
    python bench/bench_preflight.py --quick   # 5 of each (a smoke run)

Each measurement is a fresh interpreter, as every ``orchestrator run`` is, with the
config ``orchestrator init`` writes (``orchestrator/starter/config.toml``) in a temporary
directory; the three kinds are interleaved so that load on the machine falls on all alike:

  in a run    the preflight's first call (``checklist(gather(...))``, ``ask_forge=False``)
              where ``orchestrator run`` makes it: the driver, runner and engines imported
              already. The sandbox probe (one bwrap start, on a thread of its own), one
              ``git config`` for the identity, the PATH look-ups, the state dir's probe
  doctor      the same with the preflight's own imports counted (``orchestrator doctor``)
  load        ``load_config`` of the same file (the baseline every command pays)
  python      ``python -c pass`` (printed for scale)

Target: both <= 150 ms (median), the issue's budget. Printed with them: the ratio to the
config load and to python's start-up.

Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 150.0

# Timed inside the interpreter: its own start-up is python's, measured apart. ``{setup}``
# is what is imported before the clock starts.
PREFLIGHT = """
import json, os, sys, time
from pathlib import Path
from orchestrator.domain.config import load_config
loaded = load_config(Path("config.toml"))
{setup}
started = time.perf_counter()
from orchestrator.app.preflight import gather
from orchestrator.domain.preflight import checklist
checks = checklist(gather(loaded, Path(".state").resolve(), os.environ, ask_forge=False))
elapsed = time.perf_counter() - started
print(json.dumps({{"ms": elapsed * 1000,
                  "failed": [c.detail for c in checks if c.status == "fail"]}}))
"""
# ``orchestrator run`` has imported these (the driver, the runner, the engines) before its
# preflight starts; ``orchestrator doctor`` has not.
IN_RUN = "import orchestrator.cli.commands.run"
LOAD = """
import json, time
from pathlib import Path
started = time.perf_counter()
from orchestrator.domain.config import load_config
load_config(Path("config.toml"))
print(json.dumps({"ms": (time.perf_counter() - started) * 1000}))
"""


class BenchError(Exception):
    """A measured command failed: the timings would mean nothing."""


def measure(code: str, cwd: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise BenchError(f"exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def python_ms(cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], cwd=cwd, check=True, timeout=60)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 runs of each kind")
    args = parser.parse_args()
    repeats = 5 if args.quick else 15
    sys.path.insert(0, str(ROOT))
    from orchestrator import starter

    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as scratch:
        work = Path(scratch)
        (work / starter.CONFIG_NAME).write_text(starter.config_text(), encoding="utf-8")
        in_run_ms: list[float] = []
        doctor_ms: list[float] = []
        load_ms: list[float] = []
        start_ms: list[float] = []
        try:
            for _ in range(repeats):
                for setup, into in ((IN_RUN, in_run_ms), ("", doctor_ms)):
                    result = measure(PREFLIGHT.format(setup=setup), work)
                    if result["failed"]:
                        raise BenchError(f"the default config fails its preflight: {result['failed']}")  # fmt: skip
                    into.append(float(result["ms"]))  # type: ignore[arg-type]
                load_ms.append(float(measure(LOAD, work)["ms"]))  # type: ignore[arg-type]
                start_ms.append(python_ms(work))
        except (BenchError, subprocess.SubprocessError) as exc:
            print(f"bench_preflight: could not measure: {exc}", file=sys.stderr)
            return 1
    in_run = statistics.median(in_run_ms)
    doctor = statistics.median(doctor_ms)
    load = statistics.median(load_ms)
    start = statistics.median(start_ms)
    print(f"preflight on the default config, no forge request, {repeats} fresh interpreters (median):")  # fmt: skip
    print(f"  in a run    {in_run:7.1f} ms   (min {min(in_run_ms):.1f}, max {max(in_run_ms):.1f}; what `run` adds)")  # fmt: skip
    print(f"  doctor      {doctor:7.1f} ms   (min {min(doctor_ms):.1f}, max {max(doctor_ms):.1f}; its imports included)")  # fmt: skip
    print(f"  load        {load:7.1f} ms   (load_config; in a run / load = {in_run / load:.2f})")
    print(f"  python      {start:7.1f} ms   (python -c pass; in a run / start-up = {in_run / start:.2f})")  # fmt: skip
    for what, median in (("in a run", in_run), ("doctor", doctor)):
        verdict = "PASS" if median <= TARGET_MS else "FAIL"
        print(f"{verdict}: preflight {what} {median:.1f} ms <= {TARGET_MS:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
