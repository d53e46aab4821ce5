"""Benchmark: a fleet sharing no disk (PostgreSQL backend) against the local batch.

    python bench/bench_postgres_fleet.py [--quick]

bench_fleet.py's queue (40 tickets, 16 with --quick, whose one stage sleeps 0.5 s), run:

  local   `orchestrator batch --jobs 8`, the file backend                (the baseline)
  fleet   2 x `orchestrator worker --concurrency 4`, then `orchestrator batch --backend
          celery` (waits for every ticket), with `[storage] url` naming a fresh database
          of a PostgreSQL server of the benchmark's own, and NO shared disk: each worker
          in a directory of its own (its own copy of the config, so its own state dir;
          its own HOME and TMPDIR; its own process group), the batch from a third with
          its own copy and the tickets; Celery's broker a redis-server of its own

Both have eight slots. Reported, as bench_fleet.py does:

  throughput ratio   local wall time / fleet wall time           target >= 0.8
  added scheduling   (fleet wall - local wall) x 8 slots / tickets (no target here:
                     bench_fleet.py's 50 ms is for the shared-disk fleet; printed for scale)

The workers are started and seen ready before the clock starts. The tickets' repository
is a bare git repository at a path every directory can reach: the "forge" (the stage
never clones it). Skips with a line when redis-server, the `distributed` extra,
PostgreSQL or psycopg is missing. Prints PASS/FAIL; the exit code is 0 unless the
benchmark itself failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_fleet import (  # noqa: E402
    SLOTS,
    STAGE_S,
    BenchError,
    env_for,
    make_queue,
    orchestrator,
    start_redis,
    stop,
    timed_batch,
)
from pg_server import postgres  # noqa: E402

RATIO_TARGET = 0.8
MACHINES = ("machine-a", "machine-b")


def copy_config(folder: Path, text: str) -> Path:
    """``folder`` made a machine: its own copy of the config (``state_dir = "state"``, so
    a state dir of its own beside it), and its own HOME and TMPDIR."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    config = folder / "config.toml"
    config.write_text(text)
    # The fleet's one signing key pair (issue 40), made once and copied to each machine.
    shared = folder.parent / "fleet-key"
    if not (shared / "fleet.key").exists():
        shared.mkdir(exist_ok=True)
        (shared / "config.toml").write_text(text)
        subprocess.run(
            orchestrator(shared / "config.toml", "fleet", "keygen"), check=True, capture_output=True
        )
    for name in ("fleet.key", "fleet.crt"):
        shutil.copy2(shared / name, folder / name)  # mode 0600 kept
    return config


def start_workers(work: Path, text: str) -> list[subprocess.Popen[bytes]]:
    workers = []
    for name in MACHINES:
        home = work / name
        config = copy_config(home, text)
        log = home / "worker.log"
        argv = orchestrator(config, "worker", "--concurrency", str(SLOTS // 2))
        worker = subprocess.Popen(
            argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=home, env=env_for(home), start_new_session=True,
        )  # fmt: skip
        workers.append(worker)
    deadline = time.monotonic() + 60
    for name, worker in zip(MACHINES, workers, strict=True):
        log = work / name / "worker.log"
        while " ready." not in log.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"{name} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
    return workers


def fleet_batch(work: Path, text: str, tickets: Path, count: int) -> float:
    """The batch from a third directory: its own config copy, HOME and the tickets."""
    folder = work / "controller"
    config = copy_config(folder, text)
    mine = folder / "tickets"
    shutil.copytree(tickets, mine)
    started = time.perf_counter()
    proc = subprocess.run(
        orchestrator(config, "batch", "--backend", "celery", "--tickets", str(mine), "--json"),
        capture_output=True, text=True, cwd=folder, env=env_for(folder), check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise BenchError(f"fleet batch exited {proc.returncode}: {proc.stderr[-2000:]}")
    done = sum(1 for line in proc.stdout.splitlines() if '"status": "completed"' in line)
    if done != count:
        raise BenchError(f"fleet batch: {done}/{count} completed\n{proc.stdout[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    count = 16 if parser.parse_args().quick else 40
    if shutil.which("redis-server") is None:
        print("skipped: redis-server is not installed (apt-get install redis-server)")
        return 0
    try:
        import celery  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        print("skipped: the distributed extra is not installed (pip install '.[distributed]')")
        return 0
    with postgres() as pg:
        if pg is None:
            return 0
        work = Path(tempfile.mkdtemp(prefix="bench-pg-fleet-"))
        processes: list[subprocess.Popen[bytes]] = []
        try:
            server, url = start_redis(work)
            processes.append(server)
            config, tickets = make_queue(work, count, url)
            local = timed_batch(config, tickets, count, "--jobs", str(SLOTS))
            text = config.read_text() + f'[storage]\nurl = "{pg.create_database("fleet")}"\n'
            processes.extend(start_workers(work, text))
            fleet = fleet_batch(work, text, tickets, count)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        finally:
            stop(processes)
            shutil.rmtree(work, ignore_errors=True)
    ideal = count * STAGE_S / SLOTS
    ratio = local / fleet
    added_ms = (fleet - local) * SLOTS / count * 1000
    print(f"{count} tickets x {STAGE_S} s, {SLOTS} slots (ideal {ideal:.2f} s)")
    print(f"local batch --jobs {SLOTS} (files):                {local:.2f} s")
    print(f"fleet 2 workers x {SLOTS // 2} (PostgreSQL, no shared disk): {fleet:.2f} s")
    print(f"added scheduling per ticket: {added_ms:.1f} ms (no target; for scale)")
    ok = ratio >= RATIO_TARGET
    print("summary")
    print(f"  throughput local/fleet >= {RATIO_TARGET} ({ratio:.2f})   {'PASS' if ok else 'FAIL'}")
    print(json.dumps({"local_s": round(local, 3), "fleet_s": round(fleet, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
