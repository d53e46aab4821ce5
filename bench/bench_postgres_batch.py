"""What the PostgreSQL backend adds per ticket to `orchestrator batch`, against the files.

    python bench/bench_postgres_batch.py [--quick]

The queue of bench_batch.py (100 trivial tickets, 25 with --quick, every stage `true`),
run by `orchestrator batch --jobs 1` with the file backend (the baseline) and with
`[storage] url` naming a database of a PostgreSQL server of the benchmark's own (a fresh
database and a fresh state dir every run). The two backends alternate, 3 runs each (2
with --quick), so a busy moment slows both alike.

Per backend, as bench_batch.py counts it: overhead per ticket = (batch wall time - the
stages' own recorded durations - the batch's start-up) / tickets, the start-up being the
median of 3 batches over no ticket with the same backend (for PostgreSQL: connecting and
migrating a fresh database, paid once a batch). The medians of the runs are reported and
their difference is the target: at most 30 ms more per ticket with PostgreSQL.

Skips with a line when PostgreSQL or psycopg is missing. Prints PASS/FAIL; the exit code
is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_batch import make_queue, stage_seconds  # noqa: E402
from pg_server import postgres  # noqa: E402

TARGET_MS = 30.0
START_UPS = 3


class BenchError(Exception):
    """A batch did not do its work: the timings would mean nothing."""


def run_batch(
    work: Path, config_text: str, count: int, tickets_dir: str = "tickets"
) -> tuple[float, float]:
    """(wall seconds, the stages' own seconds) of one batch from a fresh state dir."""
    config = work / "config-run.toml"
    config.write_text(config_text)
    shutil.rmtree(work / "state", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_STORAGE_URL"}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--config", str(config), "batch",
         "--tickets", str(work / tickets_dir), "--jobs", "1", "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise BenchError(f"batch failed ({proc.returncode}): {proc.stderr[-2000:] or proc.stdout}")
    done = sum(1 for line in proc.stdout.splitlines() if '"status": "completed"' in line)
    if done != count:
        raise BenchError(f"{done}/{count} tickets completed:\n{proc.stdout[-2000:]}")
    return wall, stage_seconds(work / "state")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    count, rounds = (25, 2) if quick else (100, 3)
    began = time.perf_counter()
    with postgres() as pg:
        if pg is None:
            return 0
        work = Path(tempfile.mkdtemp(prefix="bench-pg-batch-"))
        try:
            config, _ = make_queue(work, count)
            (work / "no-tickets").mkdir()
            base = config.read_text()

            def text(backend: str) -> str:
                if backend == "files":
                    return base
                return base + f'[storage]\nurl = "{pg.create_database()}"\n'

            start_up: dict[str, list[float]] = {"files": [], "postgres": []}
            for _ in range(START_UPS):
                for backend in start_up:
                    wall, _ = run_batch(work, text(backend), 0, "no-tickets")
                    start_up[backend].append(wall)
            runs: dict[str, list[tuple[float, float]]] = {"files": [], "postgres": []}
            for i in range(rounds):  # interleaved, the first backend alternating
                order = ("files", "postgres") if i % 2 == 0 else ("postgres", "files")
                for backend in order:
                    runs[backend].append(run_batch(work, text(backend), count))
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(work, ignore_errors=True)

    per_ticket: dict[str, float] = {}
    print(f"{count} tickets, --jobs 1, {rounds} runs per backend, interleaved")
    for backend, samples in runs.items():
        started = statistics.median(start_up[backend])
        overheads = [(wall - stages - started) / count * 1000 for wall, stages in samples]
        per_ticket[backend] = statistics.median(overheads)
        walls = ", ".join(f"{wall:.2f}" for wall, _ in samples)
        print(
            f"  {backend:<9} batch {walls} s; stages ~{samples[0][1]:.2f} s; start-up "
            f"{started * 1000:.0f} ms (median of {START_UPS}); overhead per ticket "
            f"{per_ticket[backend]:.1f} ms (runs: {', '.join(f'{o:.1f}' for o in overheads)})"
        )
    extra = per_ticket["postgres"] - per_ticket["files"]
    ok = extra <= TARGET_MS
    print("summary")
    print(
        f"  PostgreSQL adds <= {TARGET_MS:g} ms per ticket ({extra:+.1f} ms: "
        f"{per_ticket['postgres']:.1f} vs {per_ticket['files']:.1f})   {'PASS' if ok else 'FAIL'}"
    )
    print(f"  {int(ok)}/1 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
