"""Benchmark: what the base check adds to a run once its result is cached.

    python bench/bench_base_check.py           # 11 interleaved runs of each kind
    python bench/bench_base_check.py --quick   # 3 of each (a smoke run)

A real pipeline in a temporary directory: an origin repository, the clone stage, a
command engine that changes one file, a review stage with one check that takes 0.2 s.
Each ticket is run to the end through ``run_ticket`` (the sandbox, the reaper, git, the
run record: everything a run pays), with the base check on (``on_red_base = "stop"``,
the default) and off (``"ignore"``: the pipeline as it was before the base check),
interleaved so that load on the machine falls on both alike. The first run with the base
check on fills the cache (its cost, about the check's own time, is printed).

  step        median wall time of the base check step itself (``check_the_base``) on a
              finished run's clone, cache warm (21 calls; 7 with ``--quick``): one
              ``git rev-parse HEAD`` and one small JSON file read per check
  off         median wall time of a whole run with the base check off (the baseline)
  clone       median time of those runs' clone stage, for scale
  warm        median wall time of a whole run with it on, cache warm (informational:
              the difference from ``off`` is within the runs' own spread)

Target: step / off <= 0.05 (a cached base check adds nothing a run's own spread would
show), and the check ran on the base once (counted by the check itself).

Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_base_check.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.app.base_check import check_the_base  # noqa: E402
from orchestrator.app.driver import run_ticket  # noqa: E402
from orchestrator.app.services import Services  # noqa: E402
from orchestrator.cli.console import PlainReporter  # noqa: E402
from orchestrator.domain.config import Config, LoadedConfig  # noqa: E402
from orchestrator.domain.lifecycle import RunState  # noqa: E402
from orchestrator.domain.runs import RunRecord  # noqa: E402
from orchestrator.domain.tickets import load_ticket  # noqa: E402
from orchestrator.reports.handoff import MARKDOWN  # noqa: E402
from orchestrator.storage import FileStorage  # noqa: E402

STEP_RATIO_TARGET = 0.05
CLONE = "orchestrator.stages.clone"


def pipeline(root: Path, name: str, on_red_base: str) -> LoadedConfig:
    """Clone, a command engine that changes a file, one 0.2 s review check."""
    check = {
        "name": "tests",
        "on_red_base": on_red_base,
        "writable": ["{root}/counts"],
        "command": ["bash", "-c", f"echo ran >> {{root}}/counts/{name}.n; sleep 0.2"],
    }
    config = Config.model_validate(
        {
            "state_dir": f"state-{name}",
            "recovery": {"enabled": False},
            "engines": {"edit": {"kind": "command", "command": ["bash", "-c", "date > f.txt"]}},
            "stages": [
                {"name": "clone", "cwd": "run", "command": ["{python}", "-P", "-m", CLONE]},
                {"name": "implement", "engine": "edit"},
                {"name": "review", "checks": [check]},
            ],
        }
    )
    return LoadedConfig(config=config, path=root / f"{name}.toml", root=root, sha256=name)


TICKET = """\
+++
id = "B-1"
title = "Bench"
kind = "feature"
repository = "{origin}"
base_branch = "main"
+++
Change a file.
"""


class BenchError(Exception):
    """A run did not complete: its timings would mean nothing."""


def git(*argv: str, cwd: Path) -> None:
    subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True)


def make_project(root: Path) -> tuple[dict[str, Services], Path]:
    work = root / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("bench\n")
    git("add", "README.md", cwd=work)
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "base", cwd=work)
    git("clone", "-q", "--bare", str(work), str(root / "origin.git"), cwd=root)
    (root / "counts").mkdir()
    ticket = root / "tickets" / "B-1.md"
    ticket.parent.mkdir()
    ticket.write_text(TICKET.format(origin=root / "origin.git"))
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    services = {}
    for name, option in (("on", "stop"), ("off", "ignore")):
        loaded = pipeline(root, name, option)
        services[name] = Services(
            loaded=loaded,
            storage=FileStorage(root / f"state-{name}"),
            reporter=PlainReporter(io.StringIO()),
            handoffs=MARKDOWN,
            environ={**environ, "DRY_RUN": "false"},
        )
    return services, ticket


def timed_run(services: Services, ticket: Path) -> tuple[float, RunRecord]:
    started = time.perf_counter()
    record = run_ticket(load_ticket(ticket), services, rerun=True)
    elapsed = time.perf_counter() - started
    if record.state is not RunState.COMPLETED:
        raise BenchError(f"run {record.run_id} ended {record.state}: {record.halt}")
    return elapsed, record


def timed_step(services: Services, record: RunRecord, calls: int) -> list[float]:
    """The base check step alone on ``record``'s clone, put back at the base commit, as
    the driver calls it before the engine."""
    git("checkout", "-q", "--detach", "origin/main", cwd=Path(record.clone_dir))
    again = record.model_copy(update={"base_commit": None, "state": RunState.RUNNING})
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        checked = check_the_base(again, services)
        times.append(time.perf_counter() - started)
        if checked.base_commit is None or checked.state is not RunState.RUNNING:
            raise BenchError("the base check did not answer from its cache")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    runs, calls = (3, 7) if args.quick else (11, 21)
    with tempfile.TemporaryDirectory(prefix="bench-base-check-") as tmp:
        root = Path(tmp)
        services, ticket = make_project(root)
        timed_run(services["off"], ticket)  # the page cache and imports, for both
        cold, first = timed_run(services["on"], ticket)  # fills the cache
        warm, off, clone = [], [], []
        for _ in range(runs):
            warm.append(timed_run(services["on"], ticket)[0])
            took, record = timed_run(services["off"], ticket)
            off.append(took)
            clone.append(record.attempts[0].duration_s or 0.0)
        step = timed_step(services["on"], first, calls)
        checked = len((root / "counts" / "on.n").read_text().splitlines())
    step_s, off_s = statistics.median(step), statistics.median(off)
    warm_s, clone_s = statistics.median(warm), statistics.median(clone)
    # "on" ran its check once per run, and once on the base.
    base_runs = checked - (runs + 1)
    ratio = step_s / off_s
    print(f"a run with one 0.2 s review check ({runs} interleaved runs of each kind)")
    print(f"  base check step, warm   median {step_s * 1000:7.1f} ms ({calls} calls)")
    print(f"  run, base check off     median {off_s * 1000:7.1f} ms (baseline)")
    print(f"  its clone stage         median {clone_s * 1000:7.1f} ms")
    print(f"  step / run              {ratio:.4f}; step / clone stage {step_s / clone_s:.3f}")
    print(f"  run, base check warm    median {warm_s * 1000:7.1f} ms ({warm_s / off_s:.3f}x)")
    print(f"  run, base check cold    {cold * 1000:7.1f} ms (the check on the base, once)")
    print(f"  checks run on the base  {base_runs} (of {runs + 1} runs on the same base)")
    verdicts = [
        (f"cached step / run <= {STEP_RATIO_TARGET} ", ratio <= STEP_RATIO_TARGET),
        ("the check ran on the base once ", base_runs == 1),
    ]
    judged = [f"  {label}{'PASS' if ok else 'FAIL'}" for label, ok in verdicts]
    met = sum(ok for _, ok in verdicts)
    print("\n".join(["summary", *judged, f"  {met}/{len(verdicts)} targets met"]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"bench_base_check: {exc}", file=sys.stderr)
        sys.exit(1)
