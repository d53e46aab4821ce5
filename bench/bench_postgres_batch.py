"""What the PostgreSQL backend adds per ticket to `orchestrator batch`, against the files.

    python bench/bench_postgres_batch.py [--quick]

The queue of bench_batch.py (trivial tickets, every stage `true`), run by
`orchestrator batch --jobs 1` with the file backend (the baseline) and with `[storage]
url` naming a database of a PostgreSQL server of the benchmark's own (a fresh database
and a fresh state dir every batch).

Measured in pairs: each pair runs both backends back to back (which goes first
alternates), each a batch over no ticket (its start-up: connecting and migrating a fresh
database, paid once a batch) and then a batch over 25 tickets. A backend's overhead per
ticket, as bench_batch.py counts it, is (batch wall time - the stages' own recorded
durations - the start-up just before it) / tickets; the pair's difference is what
PostgreSQL adds. The result is the median of the pairs' differences (8 pairs, 4 with
--quick); the target: at most 30 ms more per ticket.

Why pairs of small batches: this machine's speed drifts by a third and more over a
minute (the same 100-ticket PostgreSQL batch took 17.9 to 25.9 s in one sitting, and
the mirror's purely local work slowed alike), so whole batches run a minute apart
compared two machines, and one slow spell decided the verdict. Back to back, both
backends of a pair meet the same machine.

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
TICKETS = 25


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
    pairs = 4 if parser.parse_args().quick else 8
    began = time.perf_counter()
    with postgres() as pg:
        if pg is None:
            return 0
        work = Path(tempfile.mkdtemp(prefix="bench-pg-batch-"))
        try:
            config, _ = make_queue(work, TICKETS)
            (work / "no-tickets").mkdir()
            base = config.read_text()

            def text(backend: str) -> str:
                if backend == "files":
                    return base
                return base + f'[storage]\nurl = "{pg.create_database()}"\n'

            overheads: dict[str, list[float]] = {"files": [], "postgres": []}
            start_ups: dict[str, list[float]] = {"files": [], "postgres": []}
            for i in range(pairs):
                order = ("files", "postgres") if i % 2 == 0 else ("postgres", "files")
                for backend in order:
                    started, _ = run_batch(work, text(backend), 0, "no-tickets")
                    wall, stages = run_batch(work, text(backend), TICKETS)
                    start_ups[backend].append(started)
                    overheads[backend].append((wall - stages - started) / TICKETS * 1000)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(work, ignore_errors=True)

    print(f"{pairs} pairs of batches of {TICKETS} tickets, --jobs 1, back to back")
    for backend, samples in overheads.items():
        print(
            f"  {backend:<9} start-up ~{statistics.median(start_ups[backend]) * 1000:.0f} ms; "
            f"overhead per ticket {statistics.median(samples):.1f} ms "
            f"(pairs: {', '.join(f'{o:.1f}' for o in samples)})"
        )
    added = [
        pg - files for pg, files in zip(overheads["postgres"], overheads["files"], strict=True)
    ]
    extra = statistics.median(added)
    ok = extra <= TARGET_MS
    print(f"  PostgreSQL adds, pair by pair: {', '.join(f'{d:+.1f}' for d in added)} ms")
    print("summary")
    print(
        f"  PostgreSQL adds <= {TARGET_MS:g} ms per ticket ({extra:+.1f} ms, the median of "
        f"{pairs} pairs)   {'PASS' if ok else 'FAIL'}"
    )
    print(f"  {int(ok)}/1 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
