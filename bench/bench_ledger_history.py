"""Benchmark: what deciding costs the ledger with 1,000,000 rows, against with none.

    python bench/bench_ledger_history.py           # 1,000,000 rows (~1 min, ~1 GB of temp)
    python bench/bench_ledger_history.py --quick   # 100,000 rows (a smoke run, seconds)
    python bench/bench_ledger_history.py --rows N  # any size

One decision asks the ledger three things, and each is timed here as the decision path
asks it:
    history   ``LedgerLink.recent_history(signature)``: each action's latest outcomes for
              the failure signature, weighted by age (feeds a model verdict's confidence);
    lookup    ``Ledger.rows_of(decision_id)``: is this decision already recorded (a
              redelivery)? the decision writer asks before appending;
    append    ``Ledger.append`` of the decision row (flock, tail read, two fsyncs, the
              head's rename, the index update).
The same trials run against a ledger with no rows and one with N, interleaved, median of
``TRIALS`` each; the target is the difference: at most ``TARGET_MS`` more with N rows.

Setup is not timed through the decision path: the N rows are written in bulk (a valid
hash chain, built with string templates rather than N locked appends), then the index is
built from them by ``LedgerIndex.sync`` (the same code that catches an index up after a
crash; its time is printed). The big ledger is verified before it is measured, so the
timings are of a ledger ``orchestrator ledger verify`` accepts. For scale, --quick also
times the scan the index replaced.

Prints PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_ledger_history.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.app.ledger_link import LedgerLink  # noqa: E402
from orchestrator.recovery.confidence import RECENT_OUTCOMES  # noqa: E402
from orchestrator.storage.ledger import (  # noqa: E402
    ZERO_HASH,
    Ledger,
    LedgerRow,
    history_by_scan,
    inputs_hash,
    recent_outcomes_by_scan,
)

TARGET_MS = 20.0
TRIALS = 31
SIGNATURES = 1000
FULL_ROWS, QUICK_ROWS = 1_000_000, 100_000
_INPUTS = inputs_hash({"bench": True})
_ACTIONS = ("retry", "mechanical-fix", "escalate-model", "abandon-human")
_NOW = datetime(2026, 1, 20, 12, 0, tzinfo=UTC)


class BenchError(Exception):
    """The ledger was not what it should be: its timings would mean nothing."""


def _decision_json(i: int) -> str:
    """The ``decision`` member of row i's decision, canonical (keys sorted, no spaces)."""
    return json.dumps(
        {
            "signature": f"sig-{i % SIGNATURES}",
            "trace": [],
            "verdict": {
                "action": _ACTIONS[i % len(_ACTIONS)],
                "summary": "review check lint-bug-commit-order failed: split the commit",
            },
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def write_rows(path: Path, rows: int) -> str:
    """``rows`` hash-chained rows, two decisions then an outcome for the second of them,
    byte-for-byte what ``Ledger.append`` would write (the benchmark verifies it). Returns
    the last entry_hash."""
    prev, pending = ZERO_HASH, ("", "", "")
    splice = ',"inputs_hash":'
    with path.open("wb", buffering=1 << 20) as fh:
        for seq in range(1, rows + 1):
            run = f"T{seq % 5000}-20260115T120000Z-ab12"
            if seq % 3:
                decision_id = f"{run}:attempt-1:verdict-{seq}"
                decision, kind, outcome, supersedes = (
                    _decision_json(seq),
                    "decision",
                    "null",
                    "null",
                )
            else:
                decision_id, decision, decided_hash = pending
                kind, supersedes = "outcome", f'"{decided_hash}"'
                outcome = '"mechanical-fix green: lint passes"' if seq % 2 else '"needs-human: x"'
            body = (
                f'{{"capability":"recover-stage","confidence":0.5,"decision":{decision},'
                f'"decision_id":"{decision_id}","inputs_hash":"{_INPUTS}","kind":"{kind}",'
                f'"model_version":"model-a","outcome":{outcome},"prev_hash":"{prev}",'
                f'"prompt_version":"recovery-v1","routing":"auto","run":"{run}","seq":{seq},'
                f'"source":"model","supersedes":{supersedes},"ticket":"{run[:-22]}",'
                f'"ts":"2026-01-15T12:00:00.000000Z"}}'
            )
            entry_hash = hashlib.sha256(prev.encode() + body.encode()).hexdigest()
            at = body.index(splice)
            fh.write(f'{body[:at]},"entry_hash":"{entry_hash}"{body[at:]}\n'.encode())
            if kind == "decision":
                pending = (decision_id, decision, entry_hash)
            prev = entry_hash
    return prev


def build(path: Path, rows: int) -> tuple[Ledger, float, float]:
    """A ledger of ``rows`` rows with its head file and a current index: (ledger, seconds
    to write the rows, seconds to build the index)."""
    ledger = Ledger(path)
    started = time.perf_counter()
    if rows:
        ledger._write_head(rows, write_rows(path, rows))
    written = time.perf_counter() - started
    started = time.perf_counter()
    if rows:
        covered = ledger.index.sync()
        if covered.seq != rows:
            raise BenchError(f"the index covers {covered.seq} of {rows} rows")
    return ledger, written, time.perf_counter() - started


def decide(ledger: Ledger, trial: int, signature: str) -> tuple[float, float, float]:
    """One decision's ledger work, timed per step: (history, lookup, append) seconds."""
    link = LedgerLink(ledger)
    decision_id = f"BENCH-20260115T120000Z-ab12:attempt-1:verdict-{trial}"
    t0 = time.perf_counter()
    history = link.recent_history(signature, now=_NOW)
    t1 = time.perf_counter()
    already = ledger.rows_of(decision_id)
    t2 = time.perf_counter()
    ledger.append(
        LedgerRow(
            kind="decision",
            decision_id=decision_id,
            ticket="BENCH",
            run="BENCH-20260115T120000Z-ab12",
            capability="recover-stage",
            inputs_hash=_INPUTS,
            model_version="model-a",
            prompt_version="recovery-v1",
            source="model",
            decision={"verdict": {"action": "retry"}, "signature": signature},
            confidence=0.5,
            routing="auto",
        )
    )
    t3 = time.perf_counter()
    if already:
        raise BenchError(f"decision {decision_id} was already recorded")
    del history  # its answer is checked against a scan in main
    return t1 - t0, t2 - t1, t3 - t2


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows")
    parser.add_argument("--rows", type=int, default=None, help="ledger size (overrides --quick)")
    args = parser.parse_args()
    rows = args.rows if args.rows is not None else (QUICK_ROWS if args.quick else FULL_ROWS)
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp_name:
            tmp = Path(tmp_name)
            (tmp / "empty").mkdir()
            (tmp / "full").mkdir()
            print(f"setup ({rows:,} rows, written in bulk)")
            empty, _, _ = build(tmp / "empty" / "ledger.jsonl", 0)
            full, written, indexed = build(tmp / "full" / "ledger.jsonl", rows)
            size = full.path.stat().st_size if rows else 0
            print(f"  rows written         {written:9.2f} s  ({size / 1e6:,.0f} MB)")
            print(f"  index built          {indexed:9.2f} s  (LedgerIndex.sync from nothing)")
            verify_s, result = timed(full.verify)
            if not (result.ok and result.count == rows):  # type: ignore[attr-defined]
                raise BenchError(f"the generated ledger does not verify: {result}")
            print(f"  ledger verify        {verify_s:9.2f} s  (OK: {rows:,} entries)")
            signature = "sig-7"
            expected = history_by_scan(full.rows(), signature) if rows <= QUICK_ROWS else None
            if expected is not None:
                scan_s, _ = timed(lambda: history_by_scan(full.rows(), signature))
                print(f"  history by scan      {scan_s * 1000:9.1f} ms (what every decision paid)")
                got = {a: (h.green, h.total) for a, h in full.history(signature).items()}
                if got != {a: (h.green, h.total) for a, h in expected.items()}:
                    raise BenchError(f"the index answers {got}, a scan {expected}")
                recent = full.recent_outcomes(signature, RECENT_OUTCOMES)
                scanned = recent_outcomes_by_scan(full.rows(), signature, RECENT_OUTCOMES)
                if recent != scanned:
                    raise BenchError("the index's latest outcomes differ from a scan's")

            samples: dict[str, list[tuple[float, float, float]]] = {"empty": [], "full": []}
            for trial in range(TRIALS):  # interleaved: a busy moment slows both alike
                samples["empty"].append(decide(empty, trial, signature))
                samples["full"].append(decide(full, trial, signature))
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1

    def median_ms(which: str, step: int | None) -> float:
        values = [sum(s) if step is None else s[step] for s in samples[which]]
        return statistics.median(values) * 1000

    print(f"deciding (median of {TRIALS}, ms)       {'no rows':>10} {f'{rows:,} rows':>16}")
    for label, step in (("history", 0), ("lookup", 1), ("append", 2), ("total", None)):
        print(f"  {label:<34} {median_ms('empty', step):10.3f} {median_ms('full', step):16.3f}")
    extra = median_ms("full", None) - median_ms("empty", None)
    ok = extra <= TARGET_MS
    print(f"  difference                         {extra:10.3f} ms  (target <= {TARGET_MS} ms)")
    print("summary")
    label = f"deciding with {rows:,} rows <= {TARGET_MS:g} ms more than with none"
    print(f"  {label} ({extra:+.2f} ms)   {'PASS' if ok else 'FAIL'}")
    print(f"  {int(ok)}/1 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
