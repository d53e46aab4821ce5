"""Benchmark: what deciding costs the PostgreSQL ledger with 1,000,000 rows, against none.

    python bench/bench_postgres_ledger.py           # 1,000,000 rows
    python bench/bench_postgres_ledger.py --quick   # 100,000 rows
    python bench/bench_postgres_ledger.py --rows N  # any size

bench_ledger_history.py's measurement on ``PostgresLedger`` (the ledger ``[storage] url``
gives, on the connections ``PostgresStorage`` lends: ``ReusedConnections``), in two
databases of a PostgreSQL server of the benchmark's own. One decision asks the ledger:
    history   ``LedgerLink.recent_history(signature)`` (``recent_outcomes``);
    lookup    ``rows_of(decision_id)``: is this decision already recorded (a redelivery)?
    append    ``append`` of the decision row (one transaction: the head locked, the last
              row read, the row inserted, the head moved).
The same trials run against the empty database and the one with N rows, interleaved;
the target is the difference of the medians of the whole decision: at most ``TARGET_MS``
more with N rows. Where one decision on the big ledger takes over ``SLOW_S``, the trials
are cut to ``FEW_TRIALS`` (said so): the medians then still show where the time goes.

Setup: the N rows (bench_ledger_history.py's shape: two decisions, then an outcome of the
second) are encoded one by one by the ledger's own ``encode_row`` (the bytes, hashes and
chain ``append`` would make) and streamed into ``ledger_rows`` by COPY, with the head row
moved to the last one, in one transaction, as ``import_ledger`` does; then VACUUM ANALYZE
(what autovacuum does to a table that grew) and ``PostgresLedger.verify`` before
anything is timed. Skips with a line when PostgreSQL or psycopg is missing. Prints
PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pg_server import postgres  # noqa: E402

from orchestrator.app.ledger_link import LedgerLink  # noqa: E402
from orchestrator.storage.ledger import ZERO_HASH, LedgerRow, encode_row, inputs_hash  # noqa: E402
from orchestrator.storage.postgres.ledger import PostgresLedger  # noqa: E402
from orchestrator.storage.postgres.migrate import migrate  # noqa: E402
from orchestrator.storage.postgres.session import ReusedConnections  # noqa: E402

TARGET_MS = 20.0
TRIALS = 31
FEW_TRIALS = 5
SLOW_S = 1.0
SIGNATURES = 1000
FULL_ROWS, QUICK_ROWS = 1_000_000, 100_000
_INPUTS = inputs_hash({"bench": True})
_ACTIONS = ("retry", "mechanical-fix", "escalate-model", "abandon-human")
_NOW = datetime(2026, 1, 20, 12, 0, tzinfo=UTC)
_TS = "2026-01-15T12:00:00.000000Z"


class BenchError(Exception):
    """The ledger was not what it should be: its timings would mean nothing."""


def encoded_rows(rows: int) -> Generator[tuple[int, str, str, str, str], None, str]:
    """(seq, line, entry_hash, prev_hash, decision_id) of ``rows`` chained rows, each
    made by ``encode_row`` as ``append`` makes it; the last one's entry_hash is the
    generator's return value."""
    prev = ZERO_HASH
    pending: tuple[str, dict[str, Any], str] = ("", {}, "")
    for seq in range(1, rows + 1):
        run = f"T{seq % 5000}-20260115T120000Z-ab12"
        fields: dict[str, Any] = {
            "capability": "recover-stage",
            "confidence": 0.5,
            "inputs_hash": _INPUTS,
            "model_version": "model-a",
            "prompt_version": "recovery-v1",
            "routing": "auto",
            "run": run,
            "source": "model",
            "ticket": run[:-22],
            "ts": _TS,
        }
        if seq % 3:
            decision = {
                "signature": f"sig-{seq % SIGNATURES}",
                "trace": [],
                "verdict": {
                    "action": _ACTIONS[seq % len(_ACTIONS)],
                    "summary": "review check lint-bug-commit-order failed: split the commit",
                },
            }
            fields.update(
                kind="decision", decision_id=f"{run}:attempt-1:verdict-{seq}",
                decision=decision, outcome=None, supersedes=None,
            )  # fmt: skip
        else:
            decision_id, decision, decided_hash = pending
            outcome = "mechanical-fix green: lint passes" if seq % 2 else "needs-human: x"
            fields.update(
                kind="outcome", decision_id=decision_id, decision=decision,
                outcome=outcome, supersedes=decided_hash,
            )  # fmt: skip
        stored, line = encode_row(fields, seq, prev, None)
        entry_hash = stored["entry_hash"]
        yield seq, line[:-1].decode("utf-8"), entry_hash, prev, fields["decision_id"]
        if fields["kind"] == "decision":
            pending = (fields["decision_id"], fields["decision"], entry_hash)
        prev = entry_hash
    return prev


def load(url: str, rows: int) -> float:
    """Migrate the database and, with ``rows``, COPY them in and move the head; seconds."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        if not rows:
            return time.perf_counter() - started
        with conn.transaction():
            generated = encoded_rows(rows)
            last = ZERO_HASH
            with (
                conn.cursor() as cur,
                cur.copy(
                    "COPY ledger_rows (seq, line, entry_hash, prev_hash, decision_id) FROM STDIN"
                ) as copy,
            ):
                try:
                    while True:
                        copy.write_row(next(generated))
                except StopIteration as done:
                    last = done.value
            conn.execute(
                "UPDATE ledger_head SET seq = %s, entry_hash = %s, hmac = NULL WHERE id",
                (rows, last),
            )
        conn.execute("VACUUM ANALYZE ledger_rows")
    return time.perf_counter() - started


def decide(ledger: PostgresLedger, trial: int, signature: str) -> tuple[float, float, float]:
    """One decision's ledger work, timed per step: (history, lookup, append) seconds."""
    link = LedgerLink(ledger)
    decision_id = f"BENCH-20260115T120000Z-ab12:attempt-1:verdict-{trial}"
    t0 = time.perf_counter()
    link.recent_history(signature, now=_NOW)
    t1 = time.perf_counter()
    already = ledger.rows_of(decision_id)
    t2 = time.perf_counter()
    ledger.append(
        LedgerRow(
            kind="decision", decision_id=decision_id, ticket="BENCH",
            run="BENCH-20260115T120000Z-ab12", capability="recover-stage",
            inputs_hash=_INPUTS, model_version="model-a", prompt_version="recovery-v1",
            source="model", decision={"verdict": {"action": "retry"}, "signature": signature},
            confidence=0.5, routing="auto",
        )
    )  # fmt: skip
    t3 = time.perf_counter()
    if already:
        raise BenchError(f"decision {decision_id} was already recorded")
    return t1 - t0, t2 - t1, t3 - t2


def profile_history(ledger: PostgresLedger, signature: str) -> str:
    """Where one history look-up on the big ledger spends its time (cProfile, top 8)."""
    profiler = cProfile.Profile()
    profiler.enable()
    LedgerLink(ledger).recent_history(signature, now=_NOW)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    total = next(ln.strip() for ln in lines if "function calls" in ln)
    start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
    return "\n".join(["    " + total] + ["    " + ln for ln in lines[start:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows")
    parser.add_argument("--rows", type=int, default=None, help="ledger size (overrides --quick)")
    args = parser.parse_args()
    rows = args.rows if args.rows is not None else (QUICK_ROWS if args.quick else FULL_ROWS)
    began = time.perf_counter()
    with postgres() as pg:
        if pg is None:
            return 0
        try:
            empty_url, full_url = pg.create_database("empty"), pg.create_database("full")
            print(f"setup ({rows:,} rows, encoded by encode_row, COPY)")
            load(empty_url, 0)
            loaded = load(full_url, rows)
            print(f"  rows loaded          {loaded:9.2f} s  (encode, COPY, VACUUM ANALYZE)")
            empty = PostgresLedger(ReusedConnections(empty_url))
            full = PostgresLedger(ReusedConnections(full_url))
            started = time.perf_counter()
            result = full.verify()
            if not (result.ok and result.count == rows):
                raise BenchError(f"the loaded ledger does not verify: {result}")
            print(f"  ledger verify        {time.perf_counter() - started:9.2f} s  (OK: {rows:,})")
            signature = "sig-7"
            samples: dict[str, list[tuple[float, float, float]]] = {"empty": [], "full": []}
            trials = TRIALS
            trial = 0
            while trial < trials:  # interleaved: a busy moment slows both alike
                samples["empty"].append(decide(empty, trial, signature))
                samples["full"].append(decide(full, trial, signature))
                if trial == 0 and sum(samples["full"][0]) > SLOW_S:
                    trials = FEW_TRIALS
                    print(
                        f"  one decision on {rows:,} rows took {sum(samples['full'][0]):.1f} s: "
                        f"{FEW_TRIALS} trials, not {TRIALS}"
                    )
                trial += 1
            profile = profile_history(full, signature)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1

    def median_ms(which: str, step: int | None) -> float:
        values = [sum(s) if step is None else s[step] for s in samples[which]]
        return statistics.median(values) * 1000

    print(f"deciding (median of {trials}, ms)       {'no rows':>10} {f'{rows:,} rows':>16}")
    for label, step in (("history", 0), ("lookup", 1), ("append", 2), ("total", None)):
        print(f"  {label:<34} {median_ms('empty', step):10.3f} {median_ms('full', step):16.3f}")
    extra = median_ms("full", None) - median_ms("empty", None)
    ok = extra <= TARGET_MS
    print(f"  difference                         {extra:10.3f} ms  (target <= {TARGET_MS} ms)")
    print(f"  one history look-up on {rows:,} rows, profiled (cProfile, by own time):")
    print(profile)
    print("summary")
    label = f"deciding with {rows:,} rows <= {TARGET_MS:g} ms more than with none"
    print(f"  {label} ({extra:+.2f} ms)   {'PASS' if ok else 'FAIL'}")
    print(f"  {int(ok)}/1 targets met in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
