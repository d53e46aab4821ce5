"""Batch throughput and the orchestrator's own overhead per ticket.

    python bench/bench_batch.py [--quick]

100 trivial tickets (25 with --quick) whose every stage is `true`, run by
`orchestrator batch` with --jobs 1 and --jobs 2 (fresh state each). Reports the wall
times and their ratio, and the overhead per ticket beyond its stages: (batch wall time -
the stages' own recorded durations - the batch's start-up) / tickets. Target ≤ 50 ms.
Exit 0 unless it crashed.

The start-up (interpreter, imports, reading the config and an empty queue) is timed apart,
as the median of 3 batches over no ticket, and taken off before dividing: it is paid once
a batch, not once a ticket. Left in, it was spread over 25 tickets in a --quick run and
over 100 in a full one, so the same code read FAIL (62-78 ms) quick and PASS (46 ms) full.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 50.0
STAGES = "".join(
    f'[[stages]]\nname = "{name}"\ncwd = "run"\ncommand = ["true"]\n'
    for name in ("clone", "implement", "review", "open-pr")
)


def make_queue(work: Path, count: int) -> tuple[Path, Path]:
    config = work / "config.toml"
    config.write_text('state_dir = "state"\n[recovery]\nenabled = false\n' + STAGES)
    # A ticket's repository must be a git repository a clone can start from (the batch
    # refuses the ticket otherwise): one empty commit, never cloned by these stages.
    repo = work / "repo"
    repo.mkdir()
    for args in (("init", "-q"), ("commit", "-q", "--allow-empty", "-m", "base")):
        subprocess.run(
            ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
            cwd=repo, check=True, capture_output=True,
        )  # fmt: skip
    tickets = work / "tickets"
    tickets.mkdir()
    for i in range(count):
        (tickets / f"B-{i:03d}.md").write_text(
            f'+++\nid = "B-{i:03d}"\ntitle = "bench"\nkind = "chore"\n'
            f'repository = "{repo}"\n+++\nNothing.\n'
        )
    return config, tickets


def stage_seconds(state: Path) -> float:
    total = 0.0
    for record in (state / "runs").glob("*Z-????.json"):
        data = json.loads(record.read_text())
        total += sum(a.get("duration_s") or 0.0 for a in data["attempts"])
    return total


def run_batch(work: Path, jobs: int, tickets_dir: str = "tickets") -> tuple[float, float, int]:
    config, tickets = work / "config.toml", work / tickets_dir
    shutil.rmtree(work / "state", ignore_errors=True)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--config", str(config), "batch",
         "--tickets", str(tickets), "--jobs", str(jobs), "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"batch failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    completed = sum(1 for line in proc.stdout.splitlines() if '"status": "completed"' in line)
    return wall, stage_seconds(work / "state"), completed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    count = 25 if parser.parse_args().quick else 100
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        make_queue(work, count)
        (work / "no-tickets").mkdir()
        start_up = statistics.median(run_batch(work, 1, "no-tickets")[0] for _ in range(3))
        one = run_batch(work, 1)
        two = run_batch(work, 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for label, (wall, stages, done) in (("--jobs 1", one), ("--jobs 2", two)):
        print(f"{label}: {done}/{count} completed in {wall:.2f}s (stages themselves {stages:.2f}s)")
    print(f"batch start-up (no tickets, median of 3): {start_up * 1000:.0f} ms, taken off once")
    overhead_ms = (one[0] - one[1] - start_up) / count * 1000
    print(f"time ratio jobs1/jobs2: {one[0] / two[0]:.2f}x (2 cores)")
    verdict = "PASS" if overhead_ms <= TARGET_MS else "FAIL"
    print(
        f"overhead per ticket beyond its stages (--jobs 1): {overhead_ms:.1f} ms  target <= {TARGET_MS:.0f} ms  {verdict}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
