"""Benchmark: finding the root-cause lines of a 64 MiB log, against `grep -c`.

    python bench/bench_evidence.py           # a 64 MiB log
    python bench/bench_evidence.py --quick   # an 8 MiB log (a smoke run)

The log is ordinary CI output (test progress, timestamped INFO lines, downloads, compiler
command lines) with a real failure 5 % of the way in — a pytest assertion, a ruff F401, a
mypy error, a pip `No matching distribution` line — so the scan must read through the
whole window and the failure is far from the tail.

Timed, interleaved, median of the trials (the file is read once first, so both sides
read it from the page cache):

  extract   `extract_evidence(log, window_bytes=64 MiB, max_bytes=8 KiB)` in this process
  grep      `grep -c error LOG`: one literal pattern, GNU grep's fastest case
  grep -P   `grep -cP` with the whole signature table as one PCRE (the same work in C)

  baseline  the extraction ranked against a baseline learned from a green run's log

Targets:
  time      median(extract) / median(grep) <= 3; with a baseline <= 5
  memory    peak RSS growth of a fresh interpreter running the extraction <= 16 MB
            (the window is read in 1 MiB chunks into one buffer)

The root-cause lines must all be found (else the benchmark failed: exit 1). Targets print
PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_evidence.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from peak_rss import PeakError, peak_growth  # noqa: E402

from orchestrator.domain import log_line  # noqa: E402
from orchestrator.domain.baseline import learn  # noqa: E402
from orchestrator.reading.evidence import extract_evidence, render_evidence  # noqa: E402
from orchestrator.reading.scan import forget_scans  # noqa: E402
from orchestrator.reading.signatures import SIGNATURES  # noqa: E402

MiB = 1 << 20
TIME_RATIO_TARGET = 3.0
BASELINE_RATIO_TARGET = 5.0
RSS_GROWTH_TARGET_MB = 16.0
ROOT_CAUSES = (
    "E       assert total(cart) == 30",
    "src/shop/cart.py:3:8: F401 [*] `os` imported but unused",
    'src/shop/cart.py:12: error: Incompatible return value type (got "str", expected "int")',
    "ERROR: No matching distribution found for shop-utils==9.9",
)


class BenchError(Exception):
    """The fixture or the extraction was wrong: the timings would mean nothing."""


def ordinary(i: int) -> bytes:
    kind = i % 5
    if kind == 0:
        return b"tests/test_mod_%d.py::test_case_%d PASSED                  [ %d%%]\n" % (
            i % 97,
            i,
            i % 100,
        )
    if kind == 1:
        return b"2026-12-01 02:53:%02d INFO worker-%d processed batch %d in 0.03s\n" % (
            i % 60,
            i % 8,
            i,
        )
    if kind == 2:
        return b"  Downloading package_%d-1.%d.0-py3-none-any.whl (%d kB)\n" % (
            i % 300,
            i % 9,
            i % 999,
        )
    if kind == 3:
        return b"gcc -O2 -Wall -c -o build/obj_%d.o src/file_%d.c -Iinclude\n" % (i, i)
    return b"[%d/%d] Compiling module_%d with 0 warnings\n" % (i, i + 1000, i % 50)


def coloured(line: bytes, sgr: bytes) -> bytes:
    """``line`` as a tool that was told to use colour prints it."""
    return b"\x1b[" + sgr + b"m" + line.rstrip(b"\n") + b"\x1b[0m\n"


def as_gh_prints_it(line: bytes, i: int) -> bytes:
    """``line`` as ``gh run view --log`` prints it: the job's and the step's names, then
    the runner's timestamp."""
    return b"test / py3.11\tRun tests\t2026-12-01T02:53:%02d.1234567Z " % (i % 60) + line


def make_log(
    path: Path,
    size: int,
    *,
    colour: bool = False,
    gh: bool = False,
    causes: Sequence[str] = ROOT_CAUSES,
    at: int | None = None,
) -> None:
    """``size`` bytes of ordinary output with ``causes`` at byte ``at`` (5 % of the way in
    unless told)."""

    def dress(line: bytes, i: int, sgr: bytes) -> bytes:
        line = coloured(line, sgr) if colour else line
        return as_gh_prints_it(line, i) if gh else line

    failure_at = size // 20 if at is None else at
    written, i, placed = 0, 0, False
    with path.open("wb") as f:
        block = bytearray()
        while written + len(block) < size:
            if causes and not placed and written + len(block) >= failure_at:
                block += b"".join(dress(c.encode() + b"\n", i, b"1;31") for c in causes)
                placed = True
            block += dress(ordinary(i), i, b"32")
            i += 1
            if len(block) >= MiB:
                f.write(block)
                written += len(block)
                block = bytearray()
        f.write(block)


def into_page_cache(path: Path) -> None:
    """``path`` read once, so that each side of a comparison reads it from the page cache."""
    with path.open("rb") as f:
        while f.read(MiB):
            pass


def pcre_of_table() -> str:
    """The signature table as one PCRE for `grep -P`: the same alternation, at line start."""
    plain = [s.pattern.decode("latin-1") for s in SIGNATURES if not s.located]
    located = [s.pattern.decode("latin-1") for s in SIGNATURES if s.located]
    path = r"[\w./\\+@~-][\w./\\+@~-]*+"
    timestamp = "(?:" + log_line.PREFIX.decode("ascii") + ")?"
    group = path + r"(?=[:(\r\n])(?:" + "|".join(located) + ")"
    return "^(?>" + timestamp + ")(?:" + "|".join([*plain, group]) + ")"


def time_command(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise BenchError(f"{argv[:2]} failed: {done.stderr.decode(errors='replace')[:300]}")
    return elapsed


def time_extract(log: Path, known: Callable[[bytes], bool] | None = None) -> float:
    forget_scans()  # each trial scans the log, as a failure's first reading does
    started = time.perf_counter()
    evidence = extract_evidence(log, window_bytes=64 * MiB, max_bytes=8 * 1024, known=known)
    elapsed = time.perf_counter() - started
    text = render_evidence(evidence)
    missing = [r for r in ROOT_CAUSES if r not in text]
    if missing:
        raise BenchError(f"root-cause lines not found: {missing}")
    return elapsed


def peak(setup: str, statement: str, *args: str) -> tuple[float, float, Any]:
    """``peak_rss.peak_growth``, its failure a ``BenchError``."""
    try:
        return peak_growth(setup, statement, *args)
    except PeakError as exc:
        raise BenchError(str(exc)) from exc


def rss_growth_mb(log: Path) -> tuple[float, float]:
    base, growth, _ = peak(
        "from orchestrator.reading.evidence import extract_evidence",
        "extract_evidence(Path(ARGS[0]), window_bytes=64 << 20, max_bytes=8192) and None",
        str(log),
    )
    return base, growth


def rss_target(what: str, growth_mb: float, target_mb: float) -> tuple[str, bool]:
    """The summary's row for a peak RSS growth of at most ``target_mb``."""
    return f"{what} RSS growth <= {target_mb:g} MB ({growth_mb:.1f} MB)", growth_mb <= target_mb


def summarise(checks: list[tuple[str, bool]], size: int) -> int:
    """The summary: each target's row with PASS/FAIL, then how many were met; 0, the exit
    code (a missed target is not a failed benchmark)."""
    print("summary")
    for label, ok in checks:
        print(f"  {label}   {'PASS' if ok else 'FAIL'}")
    print(f"  {sum(ok for _, ok in checks)}/{len(checks)} targets met in {size // MiB} MiB")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="an 8 MiB log, fewer trials")
    args = parser.parse_args(argv)
    size = 8 * MiB if args.quick else 64 * MiB
    trials = 3 if args.quick else 7
    grep = shutil.which("grep")
    if grep is None:
        print("grep is not installed: nothing to compare with", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as tmp:
        log = Path(tmp) / "ci.log"
        make_log(log, size)
        into_page_cache(log)  # for both sides
        pcre = pcre_of_table()
        try:
            time_extract(log)  # warm-up, and the correctness check
            extract, literal, table = [], [], []
            for _ in range(trials):
                extract.append(time_extract(log))
                literal.append(time_command([grep, "-c", "error", str(log)]))
                table.append(time_command([grep, "-cP", pcre, str(log)]))
            base_mb, growth_mb = rss_growth_mb(log)

            def dressed(name: str, colour: bool = False, gh: bool = False) -> tuple[float, float]:
                """The extraction's and ``grep -c``'s medians on the same log in another
                form (informational)."""
                other = Path(tmp) / name
                make_log(other, size, colour=colour, gh=gh)
                time_extract(other)
                return statistics.median(
                    time_extract(other) for _ in range(trials)
                ), statistics.median(
                    time_command([grep, "-c", "error", str(other)]) for _ in range(trials)
                )

            # ranked against a baseline learned from a green run's log (8 MiB of it: the
            # templates repeat), as a check that has passed before is
            green = Path(tmp) / "green.log"
            make_log(green, min(size, 8 * MiB), causes=())
            baseline = learn(None, green, check="tests", repo="bench")
            time_extract(log, baseline.knows)
            with_baseline = [time_extract(log, baseline.knows) for _ in range(trials)]
            # in colour, read as a terminal shows it; as `gh run view --log` prints it
            tinted_extract, tinted_grep = dressed("ci-colour.log", colour=True)
            gh_extract, gh_grep = dressed("ci-gh.log", gh=True)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    m_extract, m_literal, m_table = (statistics.median(t) for t in (extract, literal, table))
    ratio = m_extract / m_literal
    m_baseline = statistics.median(with_baseline)
    baseline_ratio = m_baseline / m_literal
    print(f"evidence extraction ({size // MiB} MiB log, {trials} interleaved trials each)")
    print(f"  extract_evidence        median {m_extract * 1000:8.1f} ms")
    print(f"  grep -c error           median {m_literal * 1000:8.1f} ms")
    print(f"  grep -cP <the table>    median {m_table * 1000:8.1f} ms")
    print(f"  extract / grep -c       {ratio:.2f}x")
    print(f"  extract / grep -cP      {m_extract / m_table:.2f}x")
    print(
        f"  with a baseline         median {m_baseline * 1000:8.1f} ms, {baseline_ratio:.2f}x "
        f"grep -c ({len(baseline)} templates learned from a green log)"
    )
    print(f"  extraction RSS          before {base_mb:.1f} MB, growth {growth_mb:.1f} MB")
    print(f"  root-cause lines found  {len(ROOT_CAUSES)}/{len(ROOT_CAUSES)}")
    print(
        f"  the same log in colour  median {tinted_extract * 1000:8.1f} ms, "
        f"{tinted_extract / tinted_grep:.2f}x grep -c on it (informational: no target)"
    )
    print(
        f"  the same log from gh    median {gh_extract * 1000:8.1f} ms, "
        f"{gh_extract / gh_grep:.2f}x grep -c on it (informational: no target)"
    )
    checks = [
        (
            f"extraction <= {TIME_RATIO_TARGET:g}x grep -c ({ratio:.2f}x)",
            ratio <= TIME_RATIO_TARGET,
        ),
        (
            f"extraction with a baseline <= {BASELINE_RATIO_TARGET:g}x grep -c "
            f"({baseline_ratio:.2f}x)",
            baseline_ratio <= BASELINE_RATIO_TARGET,
        ),
        rss_target("extraction", growth_mb, RSS_GROWTH_TARGET_MB),
    ]
    return summarise(checks, size)


if __name__ == "__main__":
    raise SystemExit(main())
