"""`bench/run.py --quick` runs to the end and prints every measurement (no timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT, subprocess_env


def bench_output(*argv: str, expected: tuple[str, ...]) -> str:
    """Run one benchmark to the end (exit 0) and return what it printed, which must hold
    every ``expected`` line part."""
    result = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=subprocess_env(), capture_output=True,
        text=True, timeout=100,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for part in expected:
        assert part in out, f"missing {part!r} in:\n{out}"
    return out


def assert_judged(out: str, *targets: str, met: str = "targets met in ") -> None:
    """Each target's summary line (a regex, up to its verdict) ends in PASS or FAIL, and
    the count line counts exactly these targets, however many passed."""
    for target in targets:
        assert re.search(rf"^  {target}(PASS|FAIL)$", out, re.MULTILINE), out
    assert re.search(rf"^  [0-{len(targets)}]/{len(targets)} {met}", out, re.MULTILINE), out


@pytest.mark.slow
def test_bench_quick_runs_and_reports_every_measurement() -> None:
    # Five runner iterations and one start-up of each command: every measurement is made
    # and judged (30 and 7 were 4.9 s of CPU, this is 2.1).
    out = bench_output(
        "bench/run.py",
        "--quick",
        "--iterations",
        "5",
        "--repeats",
        "1",
        expected=(
            "runner overhead (5 iterations of `true`",
            "iterations of `sleep 0.1`, output to a log file)",
            "  run_process      median ",
            "  subprocess.run   median ",
            "  added per stage  ",
            "start-up (median of 1 runs each",
            "  python -c pass ",
            "  orchestrator --help (python -m) ",
            "  orchestrator report --help ",
            "  orchestrator runs (50 runs) ",
            "summary",
            "targets met",
        ),
    )
    # A verdict for every target, whatever it is: 2 runner, >= 2 start-up, >= 2 import checks.
    met = re.search(r"^  (\d+)/(\d+) targets met$", out, re.MULTILINE)
    assert met is not None and int(met.group(2)) >= 6, out
    table = out[out.index("\nsummary\n") :]
    assert len(re.findall(r" (PASS|FAIL)$", table, re.MULTILINE)) == int(met.group(2))
    # The import check is a property, not a timing: it must hold on any machine.
    # Detail lines read "  <command>   imports model SDK: <verdict>" (the summary rows start
    # with "imports model SDK:" and are covered by the targets count above).
    verdicts = re.findall(r"^  \S.*\S +imports model SDK: (.*)$", out, re.MULTILINE)
    assert len(verdicts) >= 2, out
    assert verdicts == ["no"] * len(verdicts), verdicts


def test_ledger_history_bench_runs_and_reports_both_timings_and_the_difference() -> None:
    # A tiny ledger: the point is that the benchmark still runs end to end (bulk writer,
    # index build, verify, the index checked against a scan, the timed decisions).
    out = bench_output(
        "bench/bench_ledger_history.py",
        "--rows",
        "3000",
        expected=(
            "setup (3,000 rows, written in bulk)",
            "  index built ",
            "  ledger verify ",
            "(OK: 3,000 entries)",
            "  history by scan ",
            "deciding (median of 31, ms)",
            "  history ",
            "  lookup ",
            "  append ",
            "  total ",
            "  difference ",
        ),
    )
    assert_judged(out, r"deciding with 3,000 rows <= 20 ms more .* ")


@pytest.mark.slow
def test_sandbox_bench_runs_and_reports_the_added_time_per_command() -> None:
    from support.sandbox_required import require_sandbox

    require_sandbox()
    out = bench_output(
        "bench/bench_sandbox.py",
        "--quick",
        expected=(
            "recipe sandbox (11 interleaved runs of `git status --short` in a 20-file repo)",
            "  probe (once per process) ",
            "  unsandboxed      median ",
            "  sandboxed        median ",
            "  added per command ",
            "a check's start (11 interleaved runs of `true`, the full stage profile)",
            "  added per start ",
            "summary",
        ),
    )
    assert_judged(
        out,
        r"sandbox adds <= 20 ms per recipe command .* ",
        r"sandbox adds <= 20 ms per stage or check start .* ",
    )


@pytest.mark.slow
def test_logging_bench_runs_and_reports_the_ratio_against_cat_and_the_rss() -> None:
    # 80 MiB once each: past the 64 MiB cap (the log is checked capped, with its marker),
    # every variant run; 256 MiB five times each was 4.5 s of CPU, this is 0.6.
    out = bench_output(
        "bench/bench_logging.py",
        "--mib",
        "80",
        "--trials",
        "1",
        expected=(
            "logging (80 MiB printed without pause, 1 interleaved trials each)",
            "  run_process, no cap       median ",
            "  producer | cat > file     median ",
            "  run_process, 64 MiB cap   median ",
            "  orchestrator RSS           before ",
            "summary",
        ),
    )
    assert_judged(
        out,
        r"capped logging <= 1.5x cat \(\d+\.\d\dx\)   ",
        r"orchestrator peak RSS growth <= 16 MB .* ",
    )


@pytest.mark.slow
def test_prompt_bench_reports_both_versions_on_the_demos_decisions() -> None:
    out = bench_output(
        "bench/bench_prompt.py",
        expected=("recovery-v1", "recovery-v3", "median, prompt only: ", "median, whole request"),
    )
    # The model's two decisions and the playbook's, each a row with its two sizes.
    rows = re.findall(r"^\S+ \((model|playbook)\) .* (\d\.\d\d)$", out, re.MULTILINE)
    assert sorted(source for source, _ in rows) == ["model", "model", "playbook"], out
    # The schema left the text: every prompt is smaller than the one that carried it.
    assert all(float(ratio) < 1.0 for _, ratio in rows), out


@pytest.mark.slow
def test_redaction_bench_runs_and_reports_the_ratio_against_one_regex_pass() -> None:
    out = bench_output(
        "bench/bench_redaction.py",
        "--quick",
        expected=(
            "redaction (4 MiB log, median of 3 runs each)",
            "  redact                    median ",
            "  one regex pass (baseline) median ",
            "summary",
        ),
    )
    assert_judged(out, r"redact <= 10x one regex pass \(\d+\.\d\dx\)   ")


@pytest.mark.slow
def test_evidence_bench_runs_and_reports_the_ratio_against_grep_and_the_rss() -> None:
    out = bench_output(
        "bench/bench_evidence.py",
        "--quick",
        expected=(
            "evidence extraction (8 MiB log, 3 interleaved trials each)",
            "  extract_evidence        median ",
            "  grep -c error           median ",
            "  grep -cP <the table>    median ",
            "  with a baseline         median ",
            "  root-cause lines found  4/4",
            "  the same log in colour  median ",
            "  the same log from gh    median ",
            "summary",
        ),
    )
    assert_judged(
        out,
        r"extraction <= 3x grep -c \(\d+\.\d\dx\)   ",
        r"extraction with a baseline <= 5x grep -c \(\d+\.\d\dx\)   ",
        r"extraction RSS growth <= 16 MB .* ",
        met="targets met in 8 MiB$",
    )


@pytest.mark.slow
def test_fleet_bench_runs_both_batches_and_judges_both_targets() -> None:
    import os

    from support.redis_server import redis_server_binary

    if redis_server_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is missing under CI (.ci/run installs it)")
        pytest.skip("redis-server is not installed: the fleet benchmark needs one")
    out = bench_output(
        "bench/bench_fleet.py",
        "--quick",
        # Two tickets on two slots a side: that both batches run to the end and each target
        # is judged is what this test is for; each slot is a process to start (a --jobs
        # worker, a Celery pool's child), most of its cost (eight slots: 22 s of CPU, two: 11).
        "--tickets",
        "2",
        "--slots",
        "2",
        expected=("2 tickets x 0.5 s, 2 slots", "local batch --jobs 2:", "fleet 2 workers x 1"),
    )
    # Both batches ran to the end (the script fails unless every ticket completed), and
    # each target has its verdict.
    assert re.search(
        r"^throughput ratio local/fleet: \d+\.\d\d  target >= 0\.8  (PASS|FAIL)$", out, re.M
    ), out
    assert re.search(
        r"^added scheduling per ticket: -?\d+\.\d ms  target <= 50 ms  (PASS|FAIL)$", out, re.M
    ), out


@pytest.mark.slow
def test_report_bench_runs_and_judges_both_targets() -> None:
    # A handful of runs: the point is that it runs end to end (the real seed batch, the
    # runs written through the storage writers, the report read back with all of them).
    out = bench_output(
        "bench/bench_report.py",
        "--runs",
        "6",
        expected=(
            "setup (6 runs from 2 real seed runs, through the storage writers)",
            "setup (a week: 7 older and 1 newer runs of the same tickets, 1 only queued; "
            "16 run records, ",
            "report over 6 runs (3 decisions), median of 5: today (6 tickets, one run each",
            "report over 6 runs (3 decisions), median of 5: week (6 tickets, 16 runs; ",
            "  read model only (baseline) ",
            "  report (read, render, write)",
            "  page size ",
            "  peak memory added ",
            "orchestrator runs over the week's 16 runs, median of 3",
        ),
    )
    assert_judged(
        out,
        r"report time \S+s \(target <= 2s\)  ",
        r"page size \S+ MB \(target <= 5 MB\)  ",
        r"memory added \S+ MB \(target <= 16 MB\)  ",
        r"report time \(week\) \S+s \(target <= 2s\)  ",
        r"page size \(week\) \S+ MB \(target <= 5 MB\)  ",
        r"memory added \(week\) \S+ MB \(target <= 16 MB\)  ",
        r"runs \(week\) \d+ ms \(target <= 4x python \+ 100 ms = \d+ ms\)  ",
        met="targets met$",
    )


@pytest.mark.slow
def test_reports_bench_runs_and_reports_the_ratio_against_iterparse_and_the_rss() -> None:
    out = bench_output(
        "bench/bench_reports.py",
        "--quick",
        expected=(
            "JUnit report (4 MiB, 44 failing cases, 3 interleaved trials each)",
            "  read_reports            median ",
            "  iterparse (baseline)    median ",
            "  reading RSS             before ",
            "  failing cases counted   44/44",
            "  one attribute of 16 MiB less 4 KiB ",
            "summary",
        ),
    )
    assert_judged(
        out,
        r"read <= 1.5x iterparse \(\d+\.\d\dx\)   ",
        r"reading RSS growth <= 64 MB \(\d+\.\d MB\)   ",
        met="targets met in 4 MiB$",
    )


@pytest.mark.slow
def test_held_redaction_bench_runs_and_reports_the_ratio_against_redact_alone() -> None:
    places = (ROOT.parent / "shared", ROOT.parent.parent / "shared")
    if not any(any((p / "data" / "ci-logs").glob("*/log.txt")) for p in places):
        pytest.skip("the real CI logs are not here (they live beside the project)")
    # One timed run of each: every path runs (the planted forms checked gone, the real
    # lines checked unaltered, both redactions timed); five were 7 s of CPU.
    out = bench_output(
        "bench/bench_held_redaction.py",
        "--quick",
        "--repeats",
        "1",
        expected=(
            "50 secrets held, median of 1 runs each)",
            "  redact (baseline)     median ",
            "  redact + held         median ",
            "  real-log lines the held values altered: 0",
            "summary",
        ),
    )
    assert_judged(out, r"redact \+ 50 held <= 1.5x redact \(\d+\.\d\dx\)   ")


# `bench/bench_egress.py --quick` runs to the end and prints every measurement and a
# verdict for each target (no timing asserted).
@pytest.mark.slow
def test_egress_bench_runs_and_reports_set_up_and_throughput() -> None:
    from support.sandbox_required import require_sandbox

    require_sandbox()
    result = subprocess.run(
        [sys.executable, "bench/bench_egress.py", "--quick"], cwd=ROOT, env=subprocess_env(),
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for part in (
        "connection set-up (connect + 1-byte request, median of 150 each):",
        "a stream paced as a model's (8 MiB/s, 4 KiB events), median of 3 rounds:",
        "32 MiB as fast as the loopback goes (no target), median of 3 rounds:",
    ):
        assert part in out, out
    # Signed: on a loaded machine the direct connection may time slower than the proxied.
    added = r"^(PASS|FAIL): set-up adds [+-][\d.]+ ms \(target <= 5.0 ms\)$"
    assert re.search(added, out, re.M), out
    assert re.search(r"^(PASS|FAIL): a streaming response keeps [\d.]+x", out, re.M), out
