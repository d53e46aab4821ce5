"""Benchmark: the demo's wall time with everything sandboxed (the default) against the
same demo with every stage, check, recipe and git call opted out of the sandbox.

    python bench/bench_demo_sandbox.py           # 5 interleaved demos of each (~1 min)
    python bench/bench_demo_sandbox.py --quick   # 1 of each (a smoke run)

Each demo is built afresh and its three tickets run through the real CLI in a fresh
interpreter each (as a person or cron would), so start-up, every stage, the review
checks, CARDS-1's recipe and its verifier are all in the time. The unsandboxed demo is
today's default config with ``sandbox = "none"`` on every stage, ``[sandbox] git =
"none"`` and ``recipe_sandbox = "none"``: the baseline measured in the same run. Target:
the sandboxed demo within ``TARGET_RATIO`` of it (medians). Prints PASS/FAIL; the exit
code is 0 unless the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator import starter  # noqa: E402
from orchestrator.demo.run import EXPECTED, build_demo  # noqa: E402
from orchestrator.execution.executor import LocalExecutor  # noqa: E402
from orchestrator.execution.sandbox import sandbox_available  # noqa: E402

TARGET_RATIO = 1.5
TRIALS = 5


def unsandboxed(config_text: str) -> str:
    """The default config with every part of the sandbox opted out."""
    text = re.sub(r"(?m)^network = true.*\n", "", config_text)
    text = re.sub(r'(?m)^(\[\[stages\]\]\nname = "[^"]+"\n)', r'\1sandbox = "none"\n', text)
    text = text.replace('recipe_sandbox = "bwrap"', 'recipe_sandbox = "none"')
    text = re.sub(r"(?m)^(scratch_mb = .*\n)", r'\1git = "none"\n', text)
    if text.count('sandbox = "none"') < 5 or 'git = "none"' not in text:
        raise SystemExit(
            "bench_demo_sandbox: the default config changed shape; update unsandboxed()"
        )
    return text


def run_demo(workdir: Path, config_text: str) -> float:
    layout = build_demo(workdir)
    config = layout.workdir / starter.CONFIG_NAME
    config.write_text(config_text)
    env = {**os.environ, "DRY_RUN": "false"}
    env.pop("ANTHROPIC_API_KEY", None)
    began = time.perf_counter()
    for ticket_id, path in layout.tickets.items():
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "--config", str(config), "--state-dir",
             str(layout.workdir / "state"), "run", str(path)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != EXPECTED[ticket_id]:
            raise SystemExit(
                f"bench_demo_sandbox: {ticket_id} exited {done.returncode}, expected "
                f"{EXPECTED[ticket_id]}:\n{done.stdout}{done.stderr}"
            )
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    reason = sandbox_available(LocalExecutor())
    if reason is not None:
        print(f"benchmark failed: the sandbox cannot start here: {reason}", file=sys.stderr)
        return 1
    trials = 1 if args.quick else TRIALS
    boxed_text = starter.config_text()
    plain_text = unsandboxed(boxed_text)
    times: dict[str, list[float]] = {"plain": [], "sandboxed": []}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="orch-bench-demo-") as scratch:
        for trial in range(trials):  # interleaved: a busy moment slows both alike
            times["plain"].append(run_demo(Path(scratch) / f"plain-{trial}", plain_text))
            times["sandboxed"].append(run_demo(Path(scratch) / f"boxed-{trial}", boxed_text))
    plain = statistics.median(times["plain"])
    boxed = statistics.median(times["sandboxed"])
    ratio = boxed / plain
    ok = ratio <= TARGET_RATIO
    print(f"demo wall time, three tickets through the CLI ({trials} interleaved runs of each)")
    print(f"  unsandboxed      median   {plain:7.2f} s")
    print(f"  sandboxed        median   {boxed:7.2f} s")
    print(f"  ratio                     {ratio:7.2f}x  (target <= {TARGET_RATIO:g}x)")
    print("summary")
    print(f"  sandboxed demo within {TARGET_RATIO:g}x of unsandboxed ({ratio:.2f}x)   "
          f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    print(f"  {int(ok)}/1 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
