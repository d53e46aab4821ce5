"""Benchmark: what the sandbox adds to one recipe command, and to one check's start.

    python bench/bench_sandbox.py           # 61 trials of each (~2 s)
    python bench/bench_sandbox.py --quick   # 11 trials (a smoke run)

The command is ``git status`` in a small real repository (a typical recipe command), run
through the ``LocalExecutor`` as it is today and through the ``SandboxedExecutor`` with
the recipe's own sandbox spec (clone writable, no network, the recipe environment). A
check's start is ``true`` run plain and inside the full stage profile (homes and the
state dir hidden, the clone writable with its ``.git`` read-only, the limits and the
seccomp filter): what every stage and check now pays to start. Of that, the share of the
sandbox's init (``sandbox_init.py``, the PID 1 that tells a signal from an exit: one
``python -I -S`` start) is timed against the same profile with bwrap's own init.
Trials are interleaved so a busy moment slows both alike; the target is the difference of
the medians: at most ``TARGET_MS`` added per sandboxed command. The one-time probe that
checks the sandbox can start is timed apart (it is paid once per process).

Prints PASS/FAIL; the exit code is 0 unless the benchmark itself could not run (no
usable bwrap on this machine is such a case, and says why).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_sandbox.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.domain.egress import NO_NETWORK  # noqa: E402
from orchestrator.domain.sandbox import SandboxConfig, SandboxOptions  # noqa: E402
from orchestrator.execution.executor import Executor, LocalExecutor  # noqa: E402
from orchestrator.execution.process import ProcessRequest  # noqa: E402
from orchestrator.execution.recipes import recipe_spec  # noqa: E402
from orchestrator.execution.sandbox import SandboxedExecutor, sandbox_available  # noqa: E402
from orchestrator.execution.stage_sandbox import RunPlaces, profile  # noqa: E402

TARGET_MS = 20.0
TRIALS = 61
QUICK_TRIALS = 11
COMMAND = ("git", "status", "--short")


class BenchError(Exception):
    """A command under measurement did not do what it should: its timings mean nothing."""


def make_repo(path: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }  # fmt: skip
    path.mkdir()
    for name in range(20):
        (path / f"file{name}.txt").write_text(f"line {name}\n")
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "."],
                 ["git", "commit", "-q", "-m", "initial"]):  # fmt: skip
        subprocess.run(argv, cwd=path, env=env, check=True)
    (path / "file3.txt").write_text("changed\n")


def timed_run(
    executor: Executor, clone: Path, log: Path, env: dict[str, str],
    command: tuple[str, ...] = COMMAND,
) -> float:  # fmt: skip
    began = time.perf_counter()
    outcome = executor.run(
        ProcessRequest(command, cwd=clone, env=env, log_path=log, timeout_s=30, kill_after_s=1)
    )
    elapsed = time.perf_counter() - began
    if not outcome.ok:
        raise BenchError(f"{' '.join(command)} failed (exit {outcome.exit_code}): see {log}")
    return elapsed


def check_profile(state: Path, clone: Path, *, reports_signal: bool = True) -> SandboxedExecutor:
    run_dir = clone.parent
    places = RunPlaces(
        state_dir=state, run_dir=run_dir, clone=clone, ticket_dir=run_dir / "ticket",
        repository="https://example.invalid/r.git", config_root=state.parent,
        home=Path(os.environ["HOME"]) if os.environ.get("HOME") else None,
    )  # fmt: skip
    spec = profile(
        SandboxOptions(), "check", cwd=clone, places=places, limits=SandboxConfig(),
        access=NO_NETWORK,  # a check's default: no network
    )  # fmt: skip
    return SandboxedExecutor(LocalExecutor(), replace(spec, reports_signal=reports_signal))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    trials = QUICK_TRIALS if args.quick else TRIALS
    began = time.perf_counter()
    local = LocalExecutor()
    probe_began = time.perf_counter()
    reason = sandbox_available(local)
    probe_s = time.perf_counter() - probe_began
    if reason is not None:
        print(f"benchmark failed: the sandbox cannot start here: {reason}", file=sys.stderr)
        return 1
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    samples: dict[str, list[float]] = {
        "plain": [], "sandboxed": [], "start": [], "check": [], "no-init": [],
    }  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="orch-bench-sandbox-") as scratch:
            clone = Path(scratch) / "state" / "runs" / "B-1-r" / "clone"
            clone.parent.mkdir(parents=True)
            make_repo(clone)
            sandboxed = SandboxedExecutor(local, recipe_spec(clone))
            checked = check_profile(Path(scratch) / "state", clone)
            no_init = check_profile(Path(scratch) / "state", clone, reports_signal=False)
            logs = Path(scratch) / "logs"
            for trial in range(trials):  # interleaved
                samples["plain"].append(timed_run(local, clone, logs / f"p{trial}.log", env))
                samples["sandboxed"].append(
                    timed_run(sandboxed, clone, logs / f"s{trial}.log", env)
                )
                samples["start"].append(
                    timed_run(local, clone, logs / f"t{trial}.log", env, ("true",))
                )
                samples["check"].append(
                    timed_run(checked, clone, logs / f"c{trial}.log", env, ("true",))
                )
                samples["no-init"].append(
                    timed_run(no_init, clone, logs / f"n{trial}.log", env, ("true",))
                )
            inside = (logs / "s0.log").read_text()
            if "file3.txt" not in inside:
                raise BenchError(f"the sandboxed git status did not see the change:\n{inside}")
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1

    plain, boxed, start, check, no_init_check = (
        statistics.median(samples[k]) * 1000
        for k in ("plain", "sandboxed", "start", "check", "no-init")
    )
    added, check_added = boxed - plain, check - start
    ok, check_ok = added <= TARGET_MS, check_added <= TARGET_MS
    name = " ".join(COMMAND)
    print(f"recipe sandbox ({trials} interleaved runs of `{name}` in a 20-file repo)")
    print(f"  probe (once per process)   {probe_s * 1000:8.2f} ms")
    print(f"  unsandboxed      median    {plain:8.2f} ms")
    print(f"  sandboxed        median    {boxed:8.2f} ms")
    print(f"  added per command          {added:8.2f} ms  (target <= {TARGET_MS:g} ms)")
    print(f"a check's start ({trials} interleaved runs of `true`, the full stage profile)")
    print(f"  unsandboxed      median    {start:8.2f} ms")
    print(f"  sandboxed        median    {check:8.2f} ms")
    print(f"  added per start            {check_added:8.2f} ms  (target <= {TARGET_MS:g} ms)")
    init_ms = check - no_init_check
    print(f"  of which the sandbox's init {init_ms:7.2f} ms  (against bwrap's own init)")
    print("summary")
    label = f"sandbox adds <= {TARGET_MS:g} ms per recipe command"
    print(f"  {label} ({added:+.2f} ms)   {'PASS' if ok else 'FAIL'}")
    label = f"sandbox adds <= {TARGET_MS:g} ms per stage or check start"
    print(f"  {label} ({check_added:+.2f} ms)   {'PASS' if check_ok else 'FAIL'}")
    print(f"  {int(ok) + int(check_ok)}/2 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
