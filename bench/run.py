"""Benchmarks: runner overhead per stage, CLI start-up, and what the CLI imports.

    python bench/run.py           # 200 runner iterations, 25 start-ups per command (~10 s)
    python bench/run.py --quick   # 30 iterations, 7 start-ups (a smoke run, ~3 s)

Every number is compared with a baseline measured in the same run on the same machine
(``subprocess.run`` for the runner, ``python -c pass`` for start-up), so the targets mean
the same thing on a fast laptop and on a loaded CI box. Targets are reported as PASS/FAIL;
the exit code is 0 unless the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/run.py` puts bench/, not the root, on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.execution.process import ProcessRequest  # noqa: E402
from orchestrator.execution.runner import run_process  # noqa: E402

OVERHEAD_TARGET_MS = 5.0
STARTUP_TARGET_RATIO = 4.0
FORBIDDEN_MODULES = ("anthropic", "pydantic", "pydantic_core")
FAKE_RUNS = 50


class BenchError(Exception):
    """A command under measurement did not do what it should: its timings mean nothing."""


@dataclass
class Row:
    name: str
    value: str
    target: str
    ok: bool | None  # None: informational


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# --------------------------------------------------------------------------- runner overhead


def compare_runner(
    argv: tuple[str, ...], iterations: int, workdir: Path
) -> tuple[list[float], list[float]]:
    """Per-call wall times of ``run_process(argv)`` and of ``subprocess.run(argv)``, both
    with output to a fresh log file, interleaved (alternating which goes first) so that
    drift (load, thermal) hits both alike."""
    env = dict(os.environ)
    log_dir = workdir / f"logs-{argv[0]}-{time.monotonic_ns()}"
    log_dir.mkdir()

    def with_runner(i: int) -> None:
        outcome = run_process(
            ProcessRequest(
                argv,
                cwd=workdir,
                env=env,
                log_path=log_dir / f"runner-{i}.log",
                timeout_s=60.0,
                kill_after_s=5.0,
            )
        )
        if outcome.exit_code != 0:
            raise BenchError(f"run_process({argv}) exited {outcome.exit_code}: {outcome.error}")

    def with_subprocess(i: int) -> None:
        with open(log_dir / f"subprocess-{i}.log", "ab") as log:
            result = subprocess.run(
                list(argv),
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if result.returncode != 0:
            raise BenchError(f"subprocess.run({list(argv)}) exited {result.returncode}")

    for i in range(min(3, iterations)):  # warm-up: page cache, first fork
        with_runner(-1 - i)
        with_subprocess(-1 - i)

    runner_times: list[float] = []
    baseline_times: list[float] = []
    for i in range(iterations):
        pair: list[tuple[Callable[[int], None], list[float]]] = [
            (with_runner, runner_times),
            (with_subprocess, baseline_times),
        ]
        if i % 2:
            pair.reverse()
        for fn, bucket in pair:
            t0 = time.perf_counter()
            fn(i)
            bucket.append(time.perf_counter() - t0)
    return runner_times, baseline_times


def bench_runner(iterations: int, sleep_iterations: int, workdir: Path) -> list[Row]:
    if shutil.which("true") is None or shutil.which("sleep") is None:
        raise BenchError("`true` and `sleep` must be on PATH")
    rows: list[Row] = []
    cases = (
        ("true", ("true",), iterations, "runner: added per stage (median)"),
        # A stage that takes a while: shows how late the runner notices the exit.
        ("sleep 0.1", ("sleep", "0.1"), sleep_iterations, "runner: added per 0.1 s stage"),
    )
    # Every command starts under its reaper (orchestrator/execution/reaper.py), a bare
    # interpreter start-up the guarantee "nothing outlives its stage" cannot do without;
    # the target is what the runner adds beyond that one start-up, measured here.
    bare = statistics.median(
        [_timed([sys.executable, "-I", "-S", "-c", "pass"]) for _ in range(max(5, iterations // 4))]
    )
    budget_s = bare + OVERHEAD_TARGET_MS / 1000
    for label, argv, n, row_name in cases:
        runner_times, baseline_times = compare_runner(argv, n, workdir)
        r_med, b_med = statistics.median(runner_times), statistics.median(baseline_times)
        r_mean, b_mean = statistics.fmean(runner_times), statistics.fmean(baseline_times)
        added = r_med - b_med
        ok = added <= budget_s
        print(f"runner overhead ({n} iterations of `{label}`, output to a log file)")
        print(f"  run_process      median {ms(r_med)}  mean {ms(r_mean)}")
        print(f"  subprocess.run   median {ms(b_med)}  mean {ms(b_mean)}")
        print(f"  ratio (median)   {r_med / b_med:.2f}x")
        target = f"<= reaper start-up + {OVERHEAD_TARGET_MS:g} ms ({ms(budget_s)})"
        print(
            f"  added per stage  {ms(added)} (median difference; target {target})  "
            f"{'PASS' if ok else 'FAIL'}"
        )
        rows.append(Row(row_name, ms(added), target, ok))
        if label == "true":
            rows.append(Row("runner: run_process median (true)", ms(r_med), "-", None))
            rows.append(Row("runner: subprocess.run median (true)", ms(b_med), "-", None))
    print(f"  of which the reaper's interpreter (python -I -S -c pass) median {ms(bare)}")
    rows.append(Row("runner: python -I -S start-up (reaper)", ms(bare), "-", None))
    return rows


def _timed(argv: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - began


# --------------------------------------------------------------------------- start-up


def write_fake_state(state_dir: Path, count: int) -> None:
    """Run records with every key ``orchestrator runs`` reads (see commands/runs.py)."""
    runs_dir = state_dir / "runs"
    runs_dir.mkdir(parents=True)
    now = datetime.now(UTC)
    states = ("completed", "failed", "needs-human", "running")
    for i in range(count):
        created = now - timedelta(hours=count - i)
        # Named like real runs (<ticket>-<time>-<hex>): `runs` lists nothing else.
        run_id = f"T-{i}-{created:%Y%m%dT%H%M%SZ}-{i % 65536:04x}"
        record = {
            "run_id": run_id,
            "ticket_id": f"T-{i}",
            "state": states[i % len(states)],
            "current_stage": None if i % 4 == 0 else "test",
            "created_at": created.isoformat(),
            "updated_at": (created + timedelta(minutes=5)).isoformat(),
        }
        (runs_dir / f"{run_id}.json").write_text(json.dumps(record))


@dataclass
class Command:
    label: str
    argv: list[str]
    expect_lines: int | None = None  # for `runs`: header + one line per record


def run_checked(
    command: Command, env: dict[str, str], extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command.argv,
        cwd=ROOT,
        env={**env, **(extra_env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise BenchError(
            f"{command.label}: exit {result.returncode}\n{result.stdout}{result.stderr}".rstrip()
        )
    if command.expect_lines is not None:
        lines = result.stdout.splitlines()
        warnings = [ln for ln in result.stderr.splitlines() if not ln.startswith("import time:")]
        if len(lines) != command.expect_lines or warnings:
            raise BenchError(
                f"{command.label}: expected {command.expect_lines} lines and no warnings, got "
                f"{len(lines)} lines, stderr: {chr(10).join(warnings)!r}"
            )
    return result


def imported_modules(command: Command, env: dict[str, str]) -> set[str]:
    """Every module the command imported, from CPython's own import log
    (PYTHONPROFILEIMPORTTIME, which also works through the console script)."""
    result = run_checked(command, env, {"PYTHONPROFILEIMPORTTIME": "1"})
    heavy = ", ".join(f"{name} {us / 1000:.1f}" for name, us in heaviest_imports(result.stderr))
    print(f"  {command.label:<40} heaviest imports (ms, one run): {heavy}")
    modules = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name)
    if "orchestrator.cli.main" not in modules:
        raise BenchError(
            f"{command.label}: import log does not show orchestrator.cli.main; cannot judge"
        )
    return modules


def heaviest_imports(stderr: str, count: int = 4) -> list[tuple[str, int]]:
    """Top-level imports (as the import log nests them) by cumulative microseconds."""
    tops = []
    for line in stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2]
            if name.startswith(" ") and not name.startswith("  "):  # one space: top level
                tops.append((name.strip(), int(parts[1])))
    return sorted(tops, key=lambda t: -t[1])[:count]


def forbidden_imports(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN_MODULES)
    )


def time_commands(
    commands: Sequence[Command], repeats: int, env: dict[str, str]
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {c.label: [] for c in commands}
    for command in commands:  # warm-up: page cache, .pyc files
        run_checked(command, env)
    for i in range(repeats):
        order = list(commands) if i % 2 == 0 else list(reversed(commands))
        for command in order:
            t0 = time.perf_counter()
            # No timeout here: with one, Popen.wait polls with a backoff (1, 2, 4 ... 50 ms)
            # and the times come out quantized to 15/31/63 ms. The warm-up run (with a
            # timeout) has shown the command finishes.
            subprocess.run(
                command.argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            times[command.label].append(time.perf_counter() - t0)
    return times


def bench_startup(repeats: int, workdir: Path) -> list[Row]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPROFILE")}
    env.pop("PYTHONPATH", None)  # cwd=ROOT makes `-m orchestrator` find this checkout
    state_dir = workdir / "state"
    write_fake_state(state_dir, FAKE_RUNS)
    py = sys.executable

    baseline = Command("python -c pass", [py, "-c", "pass"])
    commands = [
        Command("orchestrator --help (python -m)", [py, "-m", "orchestrator", "--help"]),
    ]
    script = Path(py).parent / "orchestrator"
    if script.is_file() and os.access(script, os.X_OK):
        commands.append(Command("orchestrator --help (console script)", [str(script), "--help"]))
        console_note = None
    else:
        console_note = f"console script {script} not installed: skipped"
    # A subcommand's help is built from argparse alone: adding a command (`report`, whose
    # work reads validated records) must not make asking about it load pydantic.
    commands.append(
        Command("orchestrator report --help", [py, "-m", "orchestrator", "report", "--help"])
    )
    commands.append(
        Command(
            f"orchestrator runs ({FAKE_RUNS} runs)",
            [py, "-m", "orchestrator", "--state-dir", str(state_dir), "runs"],
            expect_lines=FAKE_RUNS + 1,
        )
    )

    times = time_commands([baseline, *commands], repeats, env)
    base = statistics.median(times[baseline.label])
    print(f"start-up (median of {repeats} runs each; baseline `python -c pass`)")
    print(f"  {baseline.label:<40} {ms(base):>10}")
    rows = [Row("start-up: python -c pass", ms(base), "-", None)]
    for command in commands:
        median = statistics.median(times[command.label])
        ratio = median / base
        ok = ratio <= STARTUP_TARGET_RATIO
        print(
            f"  {command.label:<40} {ms(median):>10}  {ratio:.2f}x python "
            f"(target <= {STARTUP_TARGET_RATIO:g}x)  {'PASS' if ok else 'FAIL'}"
        )
        rows.append(
            Row(
                f"start-up: {command.label}",
                f"{ms(median)} = {ratio:.2f}x",
                f"<= {STARTUP_TARGET_RATIO:g}x",
                ok,
            )
        )
    if console_note:
        print(f"  ({console_note})")

    print(f"imports ({', '.join(FORBIDDEN_MODULES)} must not be imported)")
    for command in commands:
        found = forbidden_imports(imported_modules(command, env))
        verdict = "no" if not found else "YES: " + ", ".join(found[:5])
        print(f"  {command.label:<40} imports model SDK: {verdict}")
        rows.append(Row(f"imports model SDK: {command.label}", verdict, "no", not found))
    return rows


# --------------------------------------------------------------------------- main


def summary(rows: list[Row]) -> None:
    width = max(len(r.name) for r in rows)
    vwidth = max(len(r.value) for r in rows)
    twidth = max(len(r.target) for r in rows)
    print("summary")
    for r in rows:
        verdict = "" if r.ok is None else ("PASS" if r.ok else "FAIL")
        print(f"  {r.name:<{width}}  {r.value:>{vwidth}}  {r.target:<{twidth}}  {verdict}".rstrip())
    judged = [r for r in rows if r.ok is not None]
    passed = sum(1 for r in judged if r.ok)
    print(f"  {passed}/{len(judged)} targets met")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument("--iterations", type=int, help="runner iterations (default 200, quick 30)")
    parser.add_argument("--repeats", type=int, help="start-ups per command (default 25, quick 7)")
    args = parser.parse_args(argv)
    iterations = args.iterations or (30 if args.quick else 200)
    # (a median of 5 sleeps was noise enough to read FAIL now and then; 11 is steady)
    sleep_iterations = 11 if args.quick else 20
    repeats = args.repeats or (7 if args.quick else 25)

    t0 = time.perf_counter()
    print(f"python {sys.version.split()[0]} at {sys.executable}; {os.cpu_count()} cpus")
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-") as tmp:
        work = Path(tmp)
        (work / "runner").mkdir()
        (work / "startup").mkdir()
        try:
            rows = bench_runner(iterations, sleep_iterations, work / "runner")
            rows += bench_startup(repeats, work / "startup")
        except BenchError as exc:
            print(f"benchmark error: {exc}", file=sys.stderr)
            return 1
    summary(rows)
    print(f"total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
