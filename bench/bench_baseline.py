"""Benchmark: learning a baseline of green runs from a 64 MiB log.

    python bench/bench_baseline.py           # a 64 MiB log (~3 minutes: templating is slow)
    python bench/bench_baseline.py --quick   # a 1 MiB log, three trials (a smoke run)

The log is ordinary CI output (``bench_evidence.make_log``: test progress, timestamped
INFO lines, downloads, compiler command lines, every line with its own numbers). Timed
in this process's CPU time (``time.process_time``: other work on the machine does not
count), after the file is read once into the page cache; with ``--quick``, the median of
three interleaved trials on a smaller log:

  learn       ``domain.baseline.learn(None, log)``: chunks, terminal reading, CI prefixes,
              one ``template_of`` per distinct line of a chunk
  templates   ``template_key(template_of(line))`` for each line of ``open(log)``: the
              floor that ``line_templates.py`` sets, whatever ``learn`` does around it
  lines       counting the log's newlines in 1 MiB reads: the plain cost of reading it

Targets:
  time        learn / templates <= 1.1 (reading a log as a terminal shows it, in bounded
              chunks, costs little beside templating it)
  memory      peak RSS growth of a fresh interpreter learning the log <= 16 MB
Informational: learn / lines, MB/s, and how much of the log a green check learns within
``storage.baselines.LEARN_SECONDS`` (what a run waits for at most).

Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_baseline.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from bench_evidence import BenchError, make_log, peak, rss_target, summarise  # noqa: E402

from orchestrator.domain.baseline import learn  # noqa: E402
from orchestrator.domain.line_templates import template_key, template_of  # noqa: E402
from orchestrator.storage.baselines import LEARN_SECONDS  # noqa: E402

MiB = 1 << 20
TIME_RATIO_TARGET = 1.1
RSS_GROWTH_TARGET_MB = 16.0


def time_learn(log: Path) -> tuple[float, int]:
    started = time.process_time()
    baseline = learn(None, log, check="unit", repo="bench")
    elapsed = time.process_time() - started
    if not baseline.knows(template_of(b"[7/1007] Compiling module_7 with 0 warnings")):
        raise BenchError("the baseline does not know a line the log prints")
    return elapsed, len(baseline)


def time_templates(log: Path) -> tuple[float, int]:
    started = time.process_time()
    with log.open("rb") as f:
        keys = {template_key(template_of(line)) for line in f}
    return time.process_time() - started, len(keys)


def time_lines(log: Path) -> tuple[float, int]:
    started = time.process_time()
    count = 0
    with log.open("rb") as f:
        while block := f.read(MiB):
            count += block.count(b"\n")
    return time.process_time() - started, count


def learned_within(log: Path, seconds: float) -> float:
    """The MiB of the log a learn cut at ``seconds`` (of CPU) read."""
    with log.open("rb") as f:
        lines = [line.rstrip(b"\n") for line in f]
    started = time.process_time()
    done = 0
    for line in lines:
        template_key(template_of(line))
        done += len(line) + 1
        if time.process_time() - started > seconds:
            break
    return done / MiB


def rss_growth_mb(log: Path) -> tuple[float, float]:
    base, growth, _ = peak(
        "from orchestrator.domain.baseline import learn",
        'learn(None, Path(ARGS[0]), check="unit", repo="bench") and None',
        str(log),
    )
    return base, growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1 MiB log, three trials")
    args = parser.parse_args(argv)
    size = 1 * MiB if args.quick else 64 * MiB
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        log = Path(tmp) / "green.log"
        make_log(log, size)
        trials = 3 if args.quick else 1
        try:
            time_lines(log)  # into the page cache, for every side
            timed: dict[str, list[float]] = {"lines": [], "learn": [], "templates": []}
            for _ in range(trials):
                elapsed, lines = time_lines(log)
                timed["lines"].append(elapsed)
                elapsed, keys = time_learn(log)
                timed["learn"].append(elapsed)
                elapsed, template_keys = time_templates(log)
                timed["templates"].append(elapsed)
            line_s, learn_s, templates_s = (
                statistics.median(timed[k]) for k in ("lines", "learn", "templates")
            )
            base_mb, growth_mb = rss_growth_mb(log)
            within = learned_within(log, LEARN_SECONDS)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    if keys != template_keys:
        print(f"note: learn kept {keys} templates, the plain loop {template_keys}")
    ratio = learn_s / templates_s
    print(
        f"baseline learning ({size // MiB} MiB log, {lines} lines, {keys} templates; "
        f"CPU seconds, median of {trials})"
    )
    print(f"  learn                   {learn_s:8.2f} s  ({size / MiB / learn_s:.2f} MiB/s)")
    print(f"  template_of each line   {templates_s:8.2f} s  ({size / MiB / templates_s:.2f} MiB/s)")
    print(f"  count the lines         {line_s * 1000:8.1f} ms")
    print(f"  learn / template_of     {ratio:.2f}x")
    print(f"  learn / count           {learn_s / line_s:.0f}x (informational)")
    print(f"  learning RSS            before {base_mb:.1f} MB, growth {growth_mb:.1f} MB")
    print(
        f"  within {LEARN_SECONDS:g} s (a green check's budget): {min(within, size / MiB):.1f} "
        f"MiB of the log (informational)"
    )
    checks = [
        (
            f"learn <= {TIME_RATIO_TARGET:g}x template_of alone ({ratio:.2f}x)",
            ratio <= TIME_RATIO_TARGET,
        ),
        rss_target("learning", growth_mb, RSS_GROWTH_TARGET_MB),
    ]
    return summarise(checks, size)


if __name__ == "__main__":
    raise SystemExit(main())
