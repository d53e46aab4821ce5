"""Benchmark: the decision ledger's appends (durable) and its verification (one pass).

    python bench/bench_ledger.py           # 2,000 appends; verify 100,000 rows
    python bench/bench_ledger.py --quick   # 300 appends; verify 10,000 rows

append   ``Ledger.append`` with its flock, tail read, two fsyncs (row, head file) and the
         head's rename, timed over N appends: rows/s. For scale, the same lines written
         with a bare ``write`` + ``fsync`` each (what durability alone costs). No target:
         it depends on the disk.
verify   ``Ledger.verify`` over a ledger of realistic rows (~800 bytes), unkeyed and
         HMAC-keyed, against a plain loop over the same file that ``json.loads`` and
         ``sha256``-hashes every line. Target: verify <= 2x the plain loop. Runs are
         interleaved and the median of 3 taken, so a busy machine slows both alike.

The verified ledgers are built without fsync (through the same row encoder ``append``
uses), so building 100k rows takes seconds, not minutes; building is not timed.
Targets print PASS/FAIL; the exit code is 0 unless the benchmark itself failed (a ledger
did not verify, so its timing would mean nothing). Temp files are removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_ledger.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.storage.ledger import (  # noqa: E402
    ZERO_HASH,
    Ledger,
    LedgerRow,
    encode_row,
    inputs_hash,
)

VERIFY_RATIO_TARGET = 2.0
REPEATS = 3
KEY = b"bench-ledger-key"


class BenchError(Exception):
    """A ledger was not what it should be: its timings mean nothing."""


def row_fields(i: int) -> dict[str, Any]:
    """A row shaped like the recovery loop's: a verdict, its reason, a short trace."""
    return {
        "kind": "decision" if i % 3 else "outcome",
        "decision_id": f"CARDS-{i % 97}-20260115T120000Z-ab12/attempt-{i % 7}/verdict-{i % 3}",
        "ts": f"2026-01-15T12:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000000:06d}Z",
        "ticket": f"CARDS-{i % 97}",
        "run": f"CARDS-{i % 97}-20260115T120000Z-ab12",
        "capability": "recover-stage",
        "inputs_hash": inputs_hash({"i": i}),
        "model_version": "claude-sonnet-4-5",
        "prompt_version": "recovery-v3",
        "source": ("model", "playbook", "synthetic")[i % 3],
        "decision": {
            "verdict": {
                "action": ("retry", "escalate-model", "mechanical-fix", "abandon-human")[i % 4],
                "summary": f"review check lint-bug-commit-order failed on attempt {i % 7}; "
                "the fix and its test were squashed into one commit — split them",
                "verification_check": "lint-bug-commit-order",
            },
            "signature": hashlib.sha256(str(i % 50).encode()).hexdigest()[:16],
            "trace": [
                {"step": s, "tool": "read_log", "result_digest": f"{i * 7 + s:032x}"}
                for s in range(i % 3)
            ],
            "ünïcödé": "ok ✓",
        },
        "confidence": round((i % 100) / 100, 2),
        "routing": ("auto", "hitl_recommended", "hitl_required")[i % 3],
        "outcome": "mechanical-fix green" if i % 3 == 0 else None,
        "supersedes": inputs_hash(i - 1) if i % 3 == 0 else None,
    }


def build_ledger(path: Path, rows: int, key: bytes | None) -> None:
    prev = ZERO_HASH
    with path.open("wb") as fh:
        for seq in range(1, rows + 1):
            stored, line = encode_row(row_fields(seq), seq, prev, key)
            prev = stored["entry_hash"]
            fh.write(line)
    Ledger(path, key=key)._write_head(rows, prev)


def plain_loop(path: Path) -> None:
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
            hashlib.sha256(line).hexdigest()


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_append(tmp: Path, count: int) -> tuple[float, float]:
    """(rows/s through Ledger.append, rows/s of a bare write+fsync of the same lines)."""
    ledger = Ledger(tmp / "append.jsonl")
    fields = [row_fields(i) for i in range(1, count + 1)]
    start = time.perf_counter()
    for f in fields:
        ledger.append(LedgerRow(**f))
    appended = time.perf_counter() - start
    result = ledger.verify()
    if not result.ok or result.count != count:
        raise BenchError(f"appended ledger does not verify: {result}")

    lines = ledger.path.read_bytes().splitlines(keepends=True)
    fd = os.open(tmp / "bare.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for line in lines:
            os.write(fd, line)
            os.fsync(fd)
        bare = time.perf_counter() - start
    finally:
        os.close(fd)
    return count / appended, count / bare


def bench_verify(tmp: Path, rows: int, key: bytes | None) -> tuple[float, float]:
    """(median seconds of verify, median seconds of the plain loop)."""
    path = tmp / f"verify-{'keyed' if key else 'plain'}.jsonl"
    build_ledger(path, rows, key)
    ledger = Ledger(path, key=key)
    verify_times, loop_times = [], []
    for _ in range(REPEATS):
        loop_times.append(timed(lambda: plain_loop(path)))
        start = time.perf_counter()
        result = ledger.verify()
        verify_times.append(time.perf_counter() - start)
        if result.ok is not True or result.count != rows:
            raise BenchError(f"{path.name} does not verify: {result}")
    return statistics.median(verify_times), statistics.median(loop_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 appends, verify 10k rows")
    quick = parser.parse_args().quick
    appends, rows = (300, 10_000) if quick else (2_000, 100_000)
    verdicts: list[tuple[str, bool]] = []
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp_name:
            tmp = Path(tmp_name)
            print(f"append ({appends} rows, each flock + fsync of the row and of the head file)")
            ledger_rate, bare_rate = bench_append(tmp, appends)
            print(f"  Ledger.append        {ledger_rate:9.0f} rows/s")
            print(f"  write + fsync only   {bare_rate:9.0f} rows/s")
            print(f"  per append           {1000 / ledger_rate:9.3f} ms")

            for key in (None, KEY):
                label = "HMAC-keyed" if key else "unkeyed"
                print(f"verify ({rows} rows, {label}; median of {REPEATS})")
                verify_s, loop_s = bench_verify(tmp, rows, key)
                ratio = verify_s / loop_s
                print(f"  Ledger.verify        {verify_s:9.3f} s  ({rows / verify_s:,.0f} rows/s)")
                print(f"  json.loads + sha256  {loop_s:9.3f} s")
                print(f"  ratio                {ratio:9.2f}x  (target <= {VERIFY_RATIO_TARGET}x)")
                verdicts.append(
                    (
                        f"verify {label} <= {VERIFY_RATIO_TARGET}x plain loop ({ratio:.2f}x)",
                        ratio <= VERIFY_RATIO_TARGET,
                    )
                )
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    print("summary")
    for label, ok in verdicts:
        print(f"  {label:<60} {'PASS' if ok else 'FAIL'}")
    elapsed = time.perf_counter() - began
    print(f"  {sum(ok for _, ok in verdicts)}/{len(verdicts)} targets met in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
