"""Benchmark: reading the failing cases of a 50 MiB JUnit report, against the stdlib.

    python bench/bench_reports.py           # a 50 MiB report
    python bench/bench_reports.py --quick   # a 4 MiB report (a smoke run)

The report is what surefire writes for a big project, gathered into one file: suites of
100 test cases, every tenth suite with one failure (message, type, a stack trace in the
body), each suite with its captured output in a CDATA section.

Timed, interleaved, median of the trials (the file is read once first, so both sides
read it from the page cache):

  read      ``read_reports(clone, ["TEST-all.xml"])``: defusedxml's parser (no DTD, no
            entity), the bounded handlers, the cases made
  iterparse ``xml.etree.ElementTree.iterparse`` (the C accelerator), counting the
            ``<testcase>`` elements with a ``<failure>`` child and clearing each element as
            it ends: the stdlib's fastest streaming read of the same file, with none of
            the guards

Targets:
  time      median(read) / median(iterparse) <= 1.5
  memory    peak RSS growth of a fresh interpreter reading the report <= 64 MB
            (the report is streamed in 64 KiB chunks; only the open failure is kept)

Also printed, with no target: the worst a hostile report of the same size can cost
without being refused (one attribute just under the 16 MiB token limit).

Every failing case must be counted and the first ones read (else the benchmark failed:
exit 1). Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_reports.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from bench_evidence import BenchError, into_page_cache, peak, rss_target, summarise  # noqa: E402

from orchestrator.reading.check_reports import read_reports  # noqa: E402
from orchestrator.reading.check_reports.limits import XML_MAX_TOKEN_BYTES  # noqa: E402

MiB = 1 << 20
TIME_RATIO_TARGET = 1.5
RSS_GROWTH_TARGET_MB = 64.0
REPORT = "TEST-all.xml"


def suite(i: int) -> str:
    cases = []
    for j in range(100):
        name = f'name="test{j}" classname="com.example.shop.Suite{i}Test"'
        if j == 50 and i % 10 == 0:
            cases.append(
                f'  <testcase {name} time="0.012">\n'
                f'    <failure message="expected: &lt;30&gt; but was: &lt;20&gt;" '
                f'type="org.opentest4j.AssertionFailedError">'
                f"org.opentest4j.AssertionFailedError: expected: &lt;30&gt; but was: &lt;20&gt;\n"
                f"\tat org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:560)\n"
                f"\tat com.example.shop.Suite{i}Test.test{j}(Suite{i}Test.java:42)\n"
                f"</failure>\n  </testcase>\n"
            )
        else:
            cases.append(f'  <testcase {name} time="0.001"/>\n')
    output = "INFO ordinary output of a passing suite, captured by surefire\n" * 20
    return (
        f'<testsuite name="com.example.shop.Suite{i}Test" tests="100" failures="'
        f'{int(i % 10 == 0)}" errors="0" skipped="0" time="1.2">\n'
        + "".join(cases)
        + f"  <system-out><![CDATA[{output}]]></system-out>\n</testsuite>\n"
    )


def make_report(path: Path, size: int) -> int:
    """Write a report of about ``size`` bytes; return how many cases in it fail."""
    failing = 0
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="all">\n')
        written, i = 0, 0
        while written < size:
            text = suite(i)
            failing += i % 10 == 0
            f.write(text)
            written += len(text)
            i += 1
        f.write("</testsuites>\n")
    return failing


def time_read(clone: Path, failing: int) -> float:
    started = time.perf_counter()
    reading = read_reports(clone, [REPORT])
    elapsed = time.perf_counter() - started
    if reading.failing != failing or len(reading.cases) != 20 or reading.notes:
        raise BenchError(
            f"read {reading.failing} failing cases ({len(reading.cases)} kept, notes "
            f"{reading.notes}); the report holds {failing}"
        )
    if reading.cases[0].location != "Suite0Test.java:42":
        raise BenchError(f"the first case's location is {reading.cases[0].location!r}")
    return elapsed


def time_iterparse(path: Path, failing: int) -> float:
    started = time.perf_counter()
    found = 0
    failed = False
    for _event, element in ElementTree.iterparse(path, events=("end",)):
        if element.tag == "failure":
            failed = True
        elif element.tag == "testcase":
            found += failed
            failed = False
        element.clear()
    elapsed = time.perf_counter() - started
    if found != failing:
        raise BenchError(f"iterparse counted {found} failing cases, not {failing}")
    return elapsed


def rss_growth_mb(clone: Path, failing: int) -> tuple[float, float]:
    base, growth, read = peak(
        "from orchestrator.reading.check_reports import read_reports",
        "read_reports(Path(ARGS[0]), [ARGS[1]]).failing",
        str(clone),
        REPORT,
    )
    if read != failing:
        raise BenchError(f"the RSS child read {read} failing cases")
    return base, growth


def time_long_token(clone: Path) -> float:
    """One attribute just under the token limit, in a report of its own."""
    path = clone / "long-token.xml"
    with path.open("wb") as f:
        f.write(b'<testsuites><testcase name="t" classname="')
        f.write(b"y" * (XML_MAX_TOKEN_BYTES - 4096))
        f.write(b'"><failure message="m"/></testcase></testsuites>')
    started = time.perf_counter()
    reading = read_reports(clone, ["long-token.xml"])
    elapsed = time.perf_counter() - started
    if reading.failing != 1 or reading.notes:
        raise BenchError(f"the long-token report read as {reading.failing}, {reading.notes}")
    path.unlink()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 4 MiB report, fewer trials")
    args = parser.parse_args(argv)
    size = 4 * MiB if args.quick else 50 * MiB
    trials = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        clone = Path(tmp)
        report = clone / REPORT
        failing = make_report(report, size)
        into_page_cache(report)  # for both sides
        try:
            time_read(clone, failing)  # warm-up, and the correctness check
            reads, iterparses = [], []
            for i in range(trials):
                pair = [(reads, lambda: time_read(clone, failing))]
                pair.append((iterparses, lambda: time_iterparse(report, failing)))
                for bucket, measure in pair if i % 2 else reversed(pair):
                    bucket.append(measure())
            base_mb, growth_mb = rss_growth_mb(clone, failing)
            long_token = time_long_token(clone)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        actual_mib = report.stat().st_size / MiB
    m_read, m_iter = statistics.median(reads), statistics.median(iterparses)
    ratio = m_read / m_iter
    print(
        f"JUnit report ({actual_mib:.0f} MiB, {failing:,} failing cases, "
        f"{trials} interleaved trials each)"
    )
    print(f"  read_reports            median {m_read * 1000:8.1f} ms")
    print(f"  iterparse (baseline)    median {m_iter * 1000:8.1f} ms")
    print(f"  read / iterparse        {ratio:.2f}x")
    print(f"  reading RSS             before {base_mb:.1f} MB, growth {growth_mb:.1f} MB")
    print(f"  failing cases counted   {failing:,}/{failing:,}")
    print(
        f"  one attribute of {XML_MAX_TOKEN_BYTES // MiB} MiB less 4 KiB "
        f"{long_token * 1000:8.1f} ms (informational: no target)"
    )
    checks = [
        (
            f"read <= {TIME_RATIO_TARGET:g}x iterparse ({ratio:.2f}x)",
            ratio <= TIME_RATIO_TARGET,
        ),
        rss_target("reading", growth_mb, RSS_GROWTH_TARGET_MB),
    ]
    return summarise(checks, size)


if __name__ == "__main__":
    raise SystemExit(main())
