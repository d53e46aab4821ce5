"""Benchmark: logging throughput of a stage that prints without pause, with the log cap.

    python bench/bench_logging.py           # 2 GiB printed, 3 interleaved trials of each
    python bench/bench_logging.py --quick   # 256 MiB, 5 trials (a smoke run, a few seconds)
    python bench/bench_logging.py --mib 80 --trials 1   # the suite's: it runs, nothing more

The stage is a producer writing text to its stdout as fast as it can. It runs through
``run_process`` with the default cap (64 MiB kept on disk: head, marker, tail; the reaper
reads the pipe and writes the log), against the baseline measured in the same run: the
same producer piped into ``cat > file`` by a shell (every byte written, no supervision).
Trials are interleaved so a busy moment slows both alike. Targets: the median time ratio
at most ``TARGET_RATIO``; the orchestrator's own memory flat (its peak RSS grows by at
most ``RSS_TARGET_MB`` however much the stage prints). The log is checked, not timed:
capped, with the marker. For scale, the runner without a cap (every byte on disk, as
``cat`` writes it) is timed too; it has no target.

Prints PASS/FAIL; the exit code is 0 unless the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_logging.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.execution.process import DEFAULT_MAX_LOG_BYTES, ProcessRequest  # noqa: E402
from orchestrator.execution.runner import run_process  # noqa: E402

TARGET_RATIO = 1.5
RSS_TARGET_MB = 16.0
MIB = 1024 * 1024
FULL_BYTES = 2048 * MIB
QUICK_BYTES = 256 * MIB
TRIALS = 3
QUICK_TRIALS = 5  # small volumes are noisier: more of them

# Lines of text, 1 MiB per write: the stage is as fast as a pipe lets it be.
_PRODUCER = """
import os, sys
total = int(sys.argv[1])
line = b"0123456789 the stage says something rather long, over and over again ....\\n"
block = (line * (1 << 20))[: 1 << 20]
view = memoryview(block)
left = total
while left > 0:
    left -= os.write(1, view[: min(left, len(block))])
"""


class BenchError(Exception):
    """A command under measurement did not do what it should: its timings mean nothing."""


def rss_mb() -> float:
    """This process's resident set now (not the peak), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB on Linux


def through_cat(producer: tuple[str, ...], out: Path) -> float:
    script = f"{shlex.join(producer)} | cat > {shlex.quote(str(out))}"
    began = time.perf_counter()
    subprocess.run(["sh", "-c", script], check=True)
    elapsed = time.perf_counter() - began
    out.unlink()
    return elapsed


def through_runner(
    producer: tuple[str, ...], log: Path, printed: int, cap: int | None = DEFAULT_MAX_LOG_BYTES
) -> float:
    began = time.perf_counter()
    outcome = run_process(
        ProcessRequest(
            producer, cwd=log.parent, env=dict(os.environ), log_path=log,
            timeout_s=600, kill_after_s=5, max_log_bytes=cap,
        )
    )  # fmt: skip
    elapsed = time.perf_counter() - began
    if not outcome.ok:
        raise BenchError(f"the producer failed through the runner (exit {outcome.exit_code})")
    size = log.stat().st_size
    if cap is None and size < printed:
        raise BenchError(f"the uncapped log holds {size} bytes of {printed}")
    if cap is not None and printed > cap:
        if size > DEFAULT_MAX_LOG_BYTES + 4096:
            raise BenchError(f"the log holds {size} bytes, over the cap")
        with log.open("rb") as text:
            text.seek(DEFAULT_MAX_LOG_BYTES // 2)
            if b"bytes of output dropped here" not in text.read(64 * 1024):
                raise BenchError("the capped log has no marker after its head")
    log.unlink()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--mib", type=int, help="MiB printed, over the 64 MiB cap (default 2048; 256 --quick)"
    )
    parser.add_argument("--trials", type=int, help="trials of each (default 3; 5 --quick)")
    args = parser.parse_args(argv)
    default_mib = (QUICK_BYTES if args.quick else FULL_BYTES) // MIB
    printed = (default_mib if args.mib is None else args.mib) * MIB
    trials = (QUICK_TRIALS if args.quick else TRIALS) if args.trials is None else args.trials
    if printed <= DEFAULT_MAX_LOG_BYTES or trials < 1:
        parser.error(
            "--mib: more than the 64 MiB cap (the cap is what is measured); --trials: 1 or more"
        )
    began = time.perf_counter()
    samples: dict[str, list[float]] = {"cat": [], "runner": [], "uncapped": []}
    rss_before, peak_before = rss_mb(), peak_rss_mb()
    try:
        with tempfile.TemporaryDirectory(prefix="orch-bench-logging-") as scratch:
            work = Path(scratch)
            producer = (sys.executable, "-c", _PRODUCER, str(printed))
            for trial in range(trials):  # interleaved
                samples["cat"].append(through_cat(producer, work / f"cat-{trial}.out"))
                samples["runner"].append(through_runner(producer, work / f"{trial}.log", printed))
                samples["uncapped"].append(
                    through_runner(producer, work / f"u{trial}.log", printed, cap=None)
                )
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    rss_after, peak_after = rss_mb(), peak_rss_mb()

    cat = statistics.median(samples["cat"])
    ours = statistics.median(samples["runner"])
    uncapped = statistics.median(samples["uncapped"])
    ratio = ours / cat
    growth = peak_after - peak_before
    mib = printed / MIB
    print(f"logging ({mib:,.0f} MiB printed without pause, {trials} interleaved trials each)")
    print(f"  producer | cat > file     median {cat:8.3f} s  {mib / cat:8.0f} MiB/s")
    print(
        f"  run_process, 64 MiB cap   median {ours:8.3f} s  {mib / ours:8.0f} MiB/s"
        f"  (ratio {ratio:.2f}, target <= {TARGET_RATIO:g})"
    )
    print(
        f"  run_process, no cap       median {uncapped:8.3f} s  {mib / uncapped:8.0f} MiB/s"
        f"  (ratio {uncapped / cat:.2f}; every byte on disk, for scale)"
    )
    print(
        f"  orchestrator RSS           before {rss_before:6.1f} MB  after {rss_after:6.1f} MB"
        f"  (peak {peak_before:.1f} -> {peak_after:.1f} MB, growth {growth:+.1f} MB)"
    )
    ratio_ok = ratio <= TARGET_RATIO
    rss_ok = growth <= RSS_TARGET_MB
    print("summary")
    print(
        f"  capped logging <= {TARGET_RATIO:g}x cat ({ratio:.2f}x)   {'PASS' if ratio_ok else 'FAIL'}"
    )
    print(
        f"  orchestrator peak RSS growth <= {RSS_TARGET_MB:g} MB ({growth:+.1f} MB)   "
        f"{'PASS' if rss_ok else 'FAIL'}"
    )
    met = int(ratio_ok) + int(rss_ok)
    print(f"  {met}/2 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
