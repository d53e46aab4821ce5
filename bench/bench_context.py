"""Benchmark: assembling the context bundle costs the same whatever the size of the failure.

    python bench/bench_context.py           # 2 GiB log + 100 MiB diff vs 2 MiB log + 64 KiB diff
    python bench/bench_context.py --quick   # 200 MiB log + 10 MiB diff (a smoke run)

Two cases, each measured in a fresh interpreter so peak RSS means something:

  big     a 2 GiB log (sparse, but its last 16 MiB real text, so the tail read touches
          real data) and a git repository where one commit adds 100 MiB of text, as
          files of ``--file-kb`` KiB (1 MiB by default);
  small   a 2 MiB log of real text and a commit adding 64 KiB: the smallest failure that
          fills every cap the bench fills (the log tail's 16 KiB, the diff's 48 KiB), so the
          two bundles are equally full and the ratio is what the failure's size adds.
          (Against a baseline whose diff fits in a few KiB, the ratio measured how full
          the bundle is: redacting 48 KiB of diff costs more than redacting 4 KiB, at any
          size of failure. That is the caps' price, and it is bounded by them.)

Timed: only the assembly — ``capture_head(("git", "diff", "base..HEAD"),
max_bytes=limits.max_diff_bytes)`` plus ``build_bundle`` — after a warm-up, repeated, the
median taken. Fixture creation is not timed. Targets, compared within this run:

  time    median(big) / median(small) <= 1.5
  memory  peak RSS growth of the big case's process (ru_maxrss after - before) <= 64 MB

Each case also prints the two parts separately. ``build_bundle`` reads a bounded amount
whatever the input (it is ~3x more bytes in the big case only because the caps are full).
``git diff`` is the part that grows: it loads a changed file's whole blob before printing
its patch, so capture_head's cost follows the size of the first changed files (see
``--file-kb``), not the 48 KiB it keeps — and that is outside our process.

Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed (a fixture
could not be built, or a bundle came out wrong, so its timings would mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_context.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

MiB = 1 << 20
TIME_RATIO_TARGET = 1.5
RSS_GROWTH_TARGET_MB = 64.0
REAL_TAIL_BYTES = 16 * MiB
SENTINEL = "FATAL: bench sentinel, the last line of the log"


class BenchError(Exception):
    """A fixture or a bundle was not what it should be: its timings mean nothing."""


@dataclass(frozen=True)
class Case:
    name: str
    log_bytes: int
    diff_bytes: int
    diff_files: int


def _text_block(size: int, tag: str) -> bytes:
    """``size`` bytes of numbered log-like lines (varied enough not to be one repeated line)."""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += f"{tag} {i:09d} INFO step finished in {i % 997} ms, nothing to report\n".encode()
        i += 1
    return bytes(out[:size])


def make_log(path: Path, size: int, real_tail: int) -> None:
    """A ``size``-byte log: a hole (sparse, no disk, reads as NULs), then ``real_tail``
    bytes of real text ending with the sentinel line."""
    real_tail = min(real_tail, size)
    end = f"\n{SENTINEL}\n".encode()
    block = _text_block(MiB, "log")
    with path.open("wb") as f:
        f.truncate(size - real_tail)
        f.seek(size - real_tail)
        remaining = real_tail - len(end)
        while remaining > 0:
            chunk = block[: min(len(block), remaining)]
            f.write(chunk)
            remaining -= len(chunk)
        f.write(end)
    if path.stat().st_size != size:
        raise BenchError(f"{path}: expected {size} bytes, got {path.stat().st_size}")


def _git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        "LANG": "C",
    }


def _git(repo: Path, *args: str) -> None:
    result = subprocess.run(
        # Fast compression: fixture creation is not what we measure.
        ["git", "-c", "core.compression=1", "-c", "core.looseCompression=1", *args],
        cwd=repo,
        env=_git_env(repo.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if result.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace')}")


def make_repo(repo: Path, diff_bytes: int, files: int) -> None:
    """A repository whose ``base..HEAD`` adds ``files`` text files, ``diff_bytes`` in all."""
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("bench repository\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "tag", "base")
    per_file = max(1, diff_bytes // files)
    for i in range(files):
        (repo / f"data-{i:03d}.txt").write_bytes(_text_block(per_file, f"file{i:03d}"))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "add the data")


# ---- the worker: one case, in a fresh interpreter ----------------------------------------


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _current_rss_mb() -> float | None:
    """Resident now (Linux). ru_maxrss is a high-water mark: if start-up peaked above
    what we hold now, growth up to that peak would not show in it. Peak-after minus
    resident-before is the stricter bound, reported next to it."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * resource.getpagesize() / MiB


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    from orchestrator.domain.config import ContextLimits
    from orchestrator.execution.process import HeadRequest
    from orchestrator.execution.runner import capture_head
    from orchestrator.recovery.context import BundleInputs, ContextBundle, build_bundle

    limits = ContextLimits()
    repo, log, ticket = Path(spec["repo"]), Path(spec["log"]), Path(spec["ticket"])
    env = _git_env(repo.parent)
    run_state = json.dumps({"state": "recovering", "current_stage": "review"}, indent=1)
    run_record = json.dumps([{"number": n, "stage": "implement"} for n in range(1, 6)], indent=1)

    def assemble() -> tuple[ContextBundle, float, float]:
        t0 = time.perf_counter()
        request = HeadRequest(
            ("git", "diff", "base..HEAD"),
            cwd=repo,
            env=env,
            max_bytes=limits.max_diff_bytes,
            timeout_s=60.0,
        )
        head = capture_head(request)
        if head.error is not None:
            raise BenchError(f"git diff: {head.error}")
        t1 = time.perf_counter()
        bundle = build_bundle(
            BundleInputs(
                run_state=run_state,
                run_record=run_record,
                ticket_path=ticket,
                failed_log=log,
                check_name=None,
                check_log=None,
                diff=head.data,
                diff_truncated=head.truncated,
                diff_note=None,
            ),
            limits,
        )
        return bundle, t1 - t0, time.perf_counter() - t1

    rss_before = _maxrss_mb()
    resident_before = _current_rss_mb()
    captures: list[float] = []
    builds: list[float] = []
    bundle = None
    for i in range(spec["warmup"] + spec["reps"]):
        bundle, capture_s, build_s = assemble()
        if i >= spec["warmup"]:
            captures.append(capture_s)
            builds.append(build_s)
    rss_after = _maxrss_mb()
    assert bundle is not None
    tail = bundle.section("failed_log_tail")
    diff = bundle.section("diff")
    if not tail.text.endswith(SENTINEL + "\n") or tail.original_bytes != spec["log_bytes"]:
        raise BenchError(f"{spec['name']}: the log tail is not the end of the log")
    if not diff.text.startswith("diff --git") or diff.truncated != spec["diff_truncated"]:
        raise BenchError(f"{spec['name']}: unexpected diff section ({diff.describe()})")
    return {
        "times": [c + b for c, b in zip(captures, builds, strict=True)],
        "captures": captures,
        "builds": builds,
        "rss_before_mb": rss_before,
        "rss_after_mb": rss_after,
        "resident_before_mb": resident_before,
        "bundle_bytes": bundle.total_bytes,
        "diff_bytes_read": diff.original_bytes,
    }


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BenchError(f"worker for {spec['name']} failed:\n{result.stderr.strip()}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


# ---- main --------------------------------------------------------------------------------


def fmt_size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / MiB:.0f} MiB"


def build_case(case: Case, work: Path) -> dict[str, Any]:
    where = work / case.name
    where.mkdir()
    t0 = time.perf_counter()
    log = where / "stage.log"
    make_log(log, case.log_bytes, REAL_TAIL_BYTES)
    make_repo(where / "repo", case.diff_bytes, case.diff_files)
    ticket = where / "T-1.md"
    ticket.write_text('+++\nid = "T-1"\ntitle = "bench"\n+++\n' + "Do the thing.\n" * 50)
    print(
        f"  fixture {case.name}: {fmt_size(case.log_bytes)} log, "
        f"{case.diff_bytes / MiB:.2f} MiB diff in {case.diff_files} file(s) "
        f"({time.perf_counter() - t0:.1f}s to build, not timed)"
    )
    return {"name": case.name, "repo": str(where / "repo"), "log": str(log), "ticket": str(ticket)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 MiB log, 10 MiB diff")
    parser.add_argument(
        "--file-kb",
        type=int,
        default=1024,
        help="size of each file the big diff adds (default 1024): git diff loads a whole "
        "blob before printing its patch, so this sets git's share of the time",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    t_start = time.perf_counter()
    log_bytes, diff_bytes = (200 * MiB, 10 * MiB) if args.quick else (2 << 30, 100 * MiB)
    big = Case("big", log_bytes, diff_bytes, max(1, diff_bytes // (args.file_kb * 1024)))
    small = Case("small", 2 * MiB, 64 * 1024, 1)
    warmup, reps = (1, 7) if args.quick else (3, 15)
    print(f"python {sys.version.split()[0]}; context bundle assembly, {reps} timed runs per case")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-context-") as tmp:
        try:
            for case in (small, big):
                spec = build_case(case, Path(tmp))
                spec.update(
                    warmup=warmup,
                    reps=reps,
                    log_bytes=case.log_bytes,
                    # 48 KiB cap: both diffs are longer than what we read.
                    diff_truncated=True,
                )
                results[case.name] = run_worker(spec)
        except (BenchError, OSError) as exc:
            print(f"benchmark error: {exc}", file=sys.stderr)
            return 1

    med = {name: statistics.median(r["times"]) for name, r in results.items()}
    for name in ("small", "big"):
        r = results[name]
        growth = r["rss_after_mb"] - r["rss_before_mb"]
        strict = (
            f", strict {r['rss_after_mb'] - r['resident_before_mb']:+.1f}"
            if r["resident_before_mb"] is not None
            else ""
        )
        print(
            f"  {name:5}  median {med[name] * 1000:6.2f} ms "
            f"(capture_head {statistics.median(r['captures']) * 1000:5.2f} + "
            f"build_bundle {statistics.median(r['builds']) * 1000:5.2f}; "
            f"min {min(r['times']) * 1000:.2f}, max {max(r['times']) * 1000:.2f})  "
            f"peak RSS {r['rss_before_mb']:.1f} -> {r['rss_after_mb']:.1f} MB ({growth:+.1f}{strict})  "
            f"bundle {r['bundle_bytes']} B"
        )
    for part in ("captures", "builds"):
        part_ratio = statistics.median(results["big"][part]) / statistics.median(
            results["small"][part]
        )
        label = "capture_head (git diff)" if part == "captures" else "build_bundle"
        print(f"  ratio big/small, {label}: {part_ratio:.2f}x (informational)")
    ratio = med["big"] / med["small"]
    growth_big = results["big"]["rss_after_mb"] - results["big"]["rss_before_mb"]
    rows = [
        (
            "time ratio big/small (median)",
            f"{ratio:.2f}x",
            f"<= {TIME_RATIO_TARGET}x",
            ratio <= TIME_RATIO_TARGET,
        ),
        (
            "peak RSS growth, big case",
            f"{growth_big:.1f} MB",
            f"<= {RSS_GROWTH_TARGET_MB:g} MB",
            growth_big <= RSS_GROWTH_TARGET_MB,
        ),
    ]
    print("summary")
    for name, value, target, ok in rows:
        print(f"  {name:32} {value:>10}  target {target:10}  {'PASS' if ok else 'FAIL'}")
    print(f"total {time.perf_counter() - t_start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
