"""Benchmark: recognising infrastructure signs over a 64 MiB log, against `grep -c`.

    python bench/bench_signs.py           # a 64 MiB log
    python bench/bench_signs.py --quick   # an 8 MiB log (a smoke run)

The log is ordinary CI output (bench_evidence.py's: test progress, timestamped INFO
lines, downloads, compiler command lines) with one infrastructure line planted 1 % of the
way in — git's "The requested URL returned error: 503" — so the reading, which goes from
the last line up and stops at the first that decides, must read every line of the log.

Timed, interleaved, median of the trials (the file is read once first, so both sides
read it from the page cache):

  signs     every line read up as `read_up` reads it, the way a failed check's log is read
            below its lowest root-cause line (`reading.bulk`: the file in 1 MiB
            stretches from its end, one RE2 search a stretch for the lines that may
            decide, those read; the stretches above the first searched two at a time
            on threads, RE2 letting go of the GIL)
  grep      `grep -c error LOG`: one literal pattern, GNU grep's fastest case

Also printed, with no target: the same reading on one thread (RE2's automaton alone is
about 3x `grep -c`'s memchr here), and `read_up` line by line (no bulk pre-pass) over
the first 8 MiB, for scale.

Targets:
  time      median(signs) / median(grep) <= 3
  memory    peak RSS growth of a fresh interpreter running the reading <= 16 MB

The planted line must be the one recognised (else the benchmark failed: exit 1). Targets
print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_signs.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from bench_evidence import (  # noqa: E402
    BenchError,
    into_page_cache,
    make_log,
    peak,
    rss_target,
    summarise,
    time_command,
)

from orchestrator.reading.bulk import (  # noqa: E402
    SEARCH_AHEAD,
    file_stretches,
    read_up_stretches,
)
from orchestrator.reading.signs import Recognised, read_up  # noqa: E402

MiB = 1 << 20
TIME_RATIO_TARGET = 3.0
RSS_GROWTH_TARGET_MB = 16.0
PLANTED = (
    "fatal: unable to access 'https://git.example.org/team/app.git/': "
    "The requested URL returned error: 503"
)
SIGN = "server-error"
PER_LINE_BYTES = 8 * MiB


def read_signs(log: Path, search_ahead: int = SEARCH_AHEAD) -> Recognised | str | None:
    """Every line of ``log`` read up for a sign, as ``reading.failure`` reads a failed
    check's last words below its lowest root-cause line."""
    with log.open("rb") as fh:
        size = fh.seek(0, 2)
        return read_up_stretches(
            file_stretches(fh, 0, size), exit_code=1, timed_out=False, search_ahead=search_ahead
        )


def time_signs(log: Path, search_ahead: int = SEARCH_AHEAD) -> float:
    started = time.perf_counter()
    found = read_signs(log, search_ahead)
    elapsed = time.perf_counter() - started
    if not isinstance(found, Recognised) or found.sign.name != SIGN or found.line != PLANTED:
        raise BenchError(f"the planted line was not what was recognised: {found!r}")
    return elapsed


def time_per_line(log: Path) -> float:
    """``read_up`` over the first ``PER_LINE_BYTES`` (holding the planted line) with no
    bulk pre-pass: every line stripped and gated in Python."""
    with log.open("rb") as fh:
        text = fh.read(PER_LINE_BYTES).decode("utf-8", "replace")
    lines = text.splitlines()[:-1]  # the last one may be cut
    started = time.perf_counter()
    found = read_up(reversed(lines), exit_code=1, timed_out=False)
    elapsed = time.perf_counter() - started
    if not isinstance(found, Recognised) or found.sign.name != SIGN:
        raise BenchError(f"read_up did not recognise the planted line: {found!r}")
    return elapsed


def rss_growth_mb(log: Path) -> tuple[float, float]:
    base, growth, _ = peak(
        "from orchestrator.reading.bulk import file_stretches, read_up_stretches",
        "read_up_stretches(file_stretches(open(ARGS[0], 'rb'), 0, int(ARGS[1])),"
        " exit_code=1, timed_out=False) and None",
        str(log),
        str(log.stat().st_size),
    )
    return base, growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="an 8 MiB log, fewer trials")
    args = parser.parse_args(argv)
    size = 8 * MiB if args.quick else 64 * MiB
    trials = 5 if args.quick else 7
    grep = shutil.which("grep")
    if grep is None:
        print("grep is not installed: nothing to compare with", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-signs-") as tmp:
        log = Path(tmp) / "ci.log"
        make_log(log, size, causes=(PLANTED,), at=size // 100)  # 1 % of the way in
        into_page_cache(log)  # for both sides
        try:
            time_signs(log)  # warm-up, and the correctness check
            signs, literal, one_thread = [], [], []
            for _ in range(trials):
                signs.append(time_signs(log))
                literal.append(time_command([grep, "-c", "error", str(log)]))
                one_thread.append(time_signs(log, search_ahead=0))
            per_line = time_per_line(log)
            base_mb, growth_mb = rss_growth_mb(log)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    m_signs, m_literal = statistics.median(signs), statistics.median(literal)
    m_one = statistics.median(one_thread)
    ratio = m_signs / m_literal
    per_line_rate = per_line / (PER_LINE_BYTES / MiB)
    print(f"sign recognition ({size // MiB} MiB log, {trials} interleaved trials each)")
    print(f"  read up (bulk)          median {m_signs * 1000:8.1f} ms")
    print(f"  grep -c error           median {m_literal * 1000:8.1f} ms")
    print(f"  signs / grep -c         {ratio:.2f}x")
    print(
        f"  on one thread           median {m_one * 1000:8.1f} ms, {m_one / m_literal:.2f}x "
        "grep -c (informational: the searches above the first stretch not overlapped)"
    )
    print(
        f"  read_up line by line    {per_line * 1000:8.1f} ms over the first "
        f"{PER_LINE_BYTES // MiB} MiB ({per_line_rate * 1000:.1f} ms/MiB; informational)"
    )
    print(f"  reading RSS             before {base_mb:.1f} MB, growth {growth_mb:.1f} MB")
    print(f"  planted line recognised [{SIGN}]")
    checks = [
        (
            f"signs <= {TIME_RATIO_TARGET:g}x grep -c ({ratio:.2f}x)",
            ratio <= TIME_RATIO_TARGET,
        ),
        rss_target("reading", growth_mb, RSS_GROWTH_TARGET_MB),
    ]
    return summarise(checks, size)


if __name__ == "__main__":
    raise SystemExit(main())
