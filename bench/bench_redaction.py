"""Benchmark: redaction throughput against one compiled regular-expression pass.

    python bench/bench_redaction.py           # a 64 MiB log
    python bench/bench_redaction.py --quick   # a 4 MiB log (a smoke run)

The log is made of varied, realistic lines (timestamps, pytest and compiler output, paths,
git object names, request ids, a few long base64 blobs) with a secret in one line of
~2,000 (assignments, bearer headers, vendor tokens, URLs with passwords).

Timed, each as the median of 3 runs on the same text, the two interleaved:

  redact      ``redact(text)``: every rule, the line prefilter, the repeated-value pass;
  baseline    one compiled regular expression for a token shape
              (``[A-Za-z0-9_-]{20,}``) run over the same text with ``finditer`` — the
              least a regex-based redactor must do.

Target, compared within this run: redact / baseline <= 10. Also printed: MB/s for both,
and a check that every planted secret is gone (the benchmark fails, exit 1, otherwise: a
fast redactor that misses secrets measures nothing).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_redaction.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.redaction import redact  # noqa: E402

MiB = 1 << 20
RATIO_TARGET = 10.0
BASELINE = re.compile(r"[A-Za-z0-9_-]{20,}")

SECRETS = (
    "export GITHUB_TOKEN=ghp_R8kq2Lm4Nx7Pz9Qa1Sb3Tc5Ud7Ve9Wf1Xg3H",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX3Zh",
    "db url postgres://app:Zr8#kQ2mW9xL@db.internal:5432/app",
    "OPENAI_API_KEY=sk-proj-Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNm",
    "got key AKIAQ3EXAMPLEK7Z2XJ4 for upload",
)


def _line(i: int) -> str:
    kind = i % 11
    if kind == 0:
        return f"2026-01-01 12:{i % 60:02d}:{i % 59:02d} INFO worker-{i % 7} processed item {i} in {i % 97} ms"
    if kind == 1:
        return f"tests/unit/test_module_{i % 40}.py::test_case_{i % 300} PASSED [{i % 100:3d}%]"
    if kind == 2:
        return (
            f'  File "/srv/app/src/package/module_{i % 13}.py", line {i % 900}, in handler_{i % 17}'
        )
    if kind == 3:
        return f"commit {i:08x}{(i * 2654435761) % (1 << 32):08x}{i % 65536:04x}aa55cc77ee99bb11 (HEAD -> main)"
    if kind == 4:
        return f"request-id=3f2a{i % 10000:04d}-9c1e-4b7d-8a2f-{i:012d} status=200 bytes={i % 5000}"
    if kind == 5:
        return (
            f"src/app/service_{i % 30}.c:{i % 400}:{i % 80}: warning: unused variable 'tmp_{i % 9}'"
        )
    if kind == 6:
        return f"DEBUG cache hit ratio={i % 100}/100 key=user:{i % 1000}:profile ttl={i % 3600}s"
    if kind == 7:
        return f"npm WARN deprecated package-{i % 50}@{i % 9}.{i % 7}.{i % 5}: use something-else"
    if kind == 8:
        return f"E   AssertionError: assert {i % 17} == {i % 19}"
    if kind == 9:
        return "blob: " + "".join(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i * k) % 64]
            for k in range(1, 41)
        )
    return f"[{i % 24:02d}:00] step {i % 12} of 12: compiling {i % 300} files"


def make_log(size: int) -> str:
    lines: list[str] = []
    total = i = 0
    while total < size:
        line = SECRETS[(i // 2000) % len(SECRETS)] if i % 2000 == 1999 else _line(i)
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines) + "\n"


def timed(fns: list[Callable[[], object]], repeats: int = 3) -> list[float]:
    """The median time of each of ``fns``, run interleaved (one of each per round), so a
    load that comes and goes on a shared machine weighs on both sides alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 4 MiB log instead of 64 MiB")
    args = parser.parse_args(argv)
    size = 4 * MiB if args.quick else 64 * MiB
    started = time.perf_counter()
    text = make_log(size)
    out = redact(text)
    leaked = [s for s in SECRETS if s.split()[-1] in out and "AKIA" not in s]
    if "AKIAQ3EXAMPLEK7Z2XJ4" in out:
        leaked.append("AKIAQ3EXAMPLEK7Z2XJ4")
    if leaked:
        print(f"benchmark failed: planted secrets survived: {leaked}")
        return 1
    mb = len(text.encode()) / MiB
    t_redact, t_base = timed(
        [lambda: redact(text), lambda: sum(1 for _ in BASELINE.finditer(text))]
    )
    ratio = t_redact / t_base
    print(f"redaction ({mb:.0f} MiB log, median of 3 runs each)")
    print(f"  redact                    median {t_redact:8.3f} s  {mb / t_redact:7.1f} MiB/s")
    print(f"  one regex pass (baseline) median {t_base:8.3f} s  {mb / t_base:7.1f} MiB/s")
    print("summary")
    verdict = "PASS" if ratio <= RATIO_TARGET else "FAIL"
    print(f"  redact <= {RATIO_TARGET:.0f}x one regex pass ({ratio:.2f}x)   {verdict}")
    print(f"  {int(verdict == 'PASS')}/1 targets met in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
