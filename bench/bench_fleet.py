"""Benchmark: a fleet of Celery workers against the local batch, on the same queue.

    python bench/bench_fleet.py [--quick] [--tickets N] [--slots N]

40 tickets (16 with --quick) whose one stage sleeps 0.5 s, run twice from a fresh state:

  local   `orchestrator batch --jobs 8`                        (the baseline)
  fleet   2 x `orchestrator worker --concurrency 4`, then `orchestrator batch --backend celery`
          (waits for every ticket), on a redis-server of its own on a loopback port

Both have eight slots (``--slots``: another even number; the suite's smoke run, which
only proves the benchmark runs, takes two: each slot is a process to start). Reported:

  throughput ratio   local wall time / fleet wall time           target >= 0.8
  added scheduling   (fleet wall - local wall) x 8 slots / tickets: what the fleet adds
                     per ticket beyond the local batch              target <= 50 ms

The workers are started and seen ready before the clock starts (a fleet is long-lived;
its start-up is not per ticket). Each worker has its own HOME and TMPDIR and its own
process group, sharing only the state dir, as machines would. Needs `redis-server` and
the `distributed` extra; without them it says so and exits 0 (a benchmark, not a test).
Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOTS = 8
RATIO_TARGET = 0.8
ADDED_MS_TARGET = 50.0
STAGE_S = 0.5


class BenchError(Exception):
    """The fleet or the batch did not do its work: the timings would mean nothing."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_for(home: Path | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ORCHESTRATOR_BROKER_URL")
    }
    if home is not None:
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        env.update(HOME=str(home), TMPDIR=str(home / "tmp"))
    return env


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    data = work / "redis"
    data.mkdir()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    assert server.stdout is not None
    deadline = time.monotonic() + 20
    for raw in server.stdout:  # its own words, not a sleep
        if b"Ready to accept connections" in raw:
            break
        if time.monotonic() > deadline:
            raise BenchError("redis-server did not get ready")
    else:
        raise BenchError("redis-server exited before it was ready")
    # Keep draining its output so it never blocks on a full pipe.
    subprocess.Popen(["cat"], stdin=server.stdout, stdout=subprocess.DEVNULL)
    return server, f"redis://127.0.0.1:{port}/0"


def make_queue(work: Path, count: int, url: str) -> tuple[Path, Path]:
    origin = work / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    config = work / "config.toml"
    config.write_text(
        'state_dir = "state"\n'
        f'[distributed]\nbroker_url = "{url}"\nnamespace = "bench"\n'
        "[recovery]\nenabled = false\n"
        f'[[stages]]\nname = "work"\ncwd = "run"\ncommand = ["sleep", "{STAGE_S}"]\n'
    )
    # The fleet signs its task messages (issue 40): its key beside the config.
    subprocess.run(orchestrator(config, "fleet", "keygen"), check=True, capture_output=True)
    tickets = work / "tickets"
    tickets.mkdir()
    for i in range(count):
        (tickets / f"F-{i:03d}.md").write_text(
            f'+++\nid = "F-{i:03d}"\ntitle = "bench"\nkind = "chore"\n'
            f'repository = "{origin}"\n+++\nNothing.\n'
        )
    return config, tickets


def orchestrator(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator", "--config", str(config), *args]


def timed_batch(config: Path, tickets: Path, count: int, *extra: str) -> float:
    shutil.rmtree(config.parent / "state", ignore_errors=True)
    started = time.perf_counter()
    proc = subprocess.run(
        orchestrator(config, "batch", "--tickets", str(tickets), "--json", *extra),
        capture_output=True, text=True, cwd=config.parent, env=env_for(), check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise BenchError(f"batch {' '.join(extra)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    done = sum(1 for line in proc.stdout.splitlines() if '"status": "completed"' in line)
    if done != count:
        raise BenchError(
            f"batch {' '.join(extra)}: {done}/{count} completed\n{proc.stdout[-2000:]}"
        )
    return wall


def start_workers(work: Path, config: Path, slots: int) -> list[subprocess.Popen[bytes]]:
    workers = []
    for name in ("machine-a", "machine-b"):
        home = work / name
        log = home / "worker.log"
        home.mkdir()
        argv = orchestrator(config, "worker", "--concurrency", str(slots // 2))
        worker = subprocess.Popen(
            argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=home, env=env_for(home), start_new_session=True,
        )  # fmt: skip
        workers.append(worker)
    deadline = time.monotonic() + 60
    for name, worker in zip(("machine-a", "machine-b"), workers, strict=True):
        log = work / name / "worker.log"
        # Another process's log: there is nothing to wait on but its text.
        while " ready." not in log.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"{name} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
    return workers


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--tickets", type=int, metavar="N",
        help="the queue's size (default 40; 16 with --quick): the suite's smoke run uses a few",
    )  # fmt: skip
    parser.add_argument(
        "--slots", type=int, default=SLOTS, metavar="N",
        help=f"slots on each side, an even number (default {SLOTS}): the local batch's --jobs, "
        "and two workers of N/2 each",
    )  # fmt: skip
    args = parser.parse_args()
    count = args.tickets or (16 if args.quick else 40)
    slots = args.slots
    if count < 1:
        parser.error("--tickets: at least 1")
    if slots < 2 or slots % 2:
        parser.error("--slots: an even number, at least 2")
    if shutil.which("redis-server") is None:
        print("skipped: redis-server is not installed (apt-get install redis-server)")
        return 0
    try:
        import celery  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        print("skipped: the distributed extra is not installed (pip install '.[distributed]')")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        server, url = start_redis(work)
        processes.append(server)
        config, tickets = make_queue(work, count, url)
        local = timed_batch(config, tickets, count, "--jobs", str(slots))
        processes.extend(start_workers(work, config, slots))
        fleet = timed_batch(config, tickets, count, "--backend", "celery")
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        stop(processes)
        shutil.rmtree(work, ignore_errors=True)
    ideal = count * STAGE_S / slots
    ratio = local / fleet
    added_ms = (fleet - local) * slots / count * 1000
    print(f"{count} tickets x {STAGE_S} s, {slots} slots (ideal {ideal:.2f} s)")
    print(f"local batch --jobs {slots}:            {local:.2f} s")
    print(f"fleet 2 workers x {slots // 2} (celery):    {fleet:.2f} s")
    verdict = "PASS" if ratio >= RATIO_TARGET else "FAIL"
    print(f"throughput ratio local/fleet: {ratio:.2f}  target >= {RATIO_TARGET}  {verdict}")
    verdict = "PASS" if added_ms <= ADDED_MS_TARGET else "FAIL"
    print(
        f"added scheduling per ticket: {added_ms:.1f} ms  target <= {ADDED_MS_TARGET:.0f} ms  "
        f"{verdict}"
    )
    print(json.dumps({"local_s": round(local, 3), "fleet_s": round(fleet, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
