"""Benchmark: matching a failure against a playbook of 1,000 promoted entries (issue 44).

    python bench/bench_playbook.py           # 1,000 entries
    python bench/bench_playbook.py --quick   # the same 1,000 entries, fewer trials

What a decision pays, as ``app.recover`` pays it: ``load_playbook`` of the project's
``playbook/`` directory, ``signature_of`` the failure's deciding lines, and
``Playbook.match`` (which reads and validates the one entry file the failure's key names).
The failure matches one of the entries, a different one each trial. The entries are
learned-shape files (a signature of two lines, two lines of provenance, a mechanical-fix
plan), written by ``PlaybookStore.write``; the benchmark then waits for the directory to
settle (the index trusts a directory unchanged for 2 s), as a playbook does between
the runs that change it.

Timed, interleaved with the baseline, median of the trials:

  warm     in this process, decision after decision (a batch's worker): the index and
           the entries parsed earlier are kept while their files are unchanged
  cold     a fresh interpreter's first decision (``orchestrator run``): modules imported
           first, untimed; the index read from its file
  baseline the same, against a project with no playbook directory (the built-in entry)

Also printed, with no target: the parts of a warm decision (load, signature, match); the
first decision after the directory changed (one entry written: every file stat()ed and
the new one parsed); and reading all 1,000 files (``PlaybookStore.entries``, what a
decision paid before the index, and what ``orchestrator playbook list`` pays).

Target: a decision with 1,000 entries costs at most 5 ms more than the baseline, warm and
cold. The match must find the entry (else the benchmark failed: exit 1). Targets print
PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_playbook.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.app.playbook import load_playbook, store_for  # noqa: E402
from orchestrator.domain.failure_signature import signature_of  # noqa: E402
from orchestrator.domain.playbook import (  # noqa: E402
    EntryStatus,
    Match,
    PlaybookEntry,
    Provenance,
    entry_id_for,
)
from orchestrator.domain.proposals import Failure  # noqa: E402

ENTRIES = 1000
TARGET_MS = 5.0
AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
STAGE, CHECK = "review", "project-tests"
SETTLE_S = 2.1


class BenchError(Exception):
    """The fixture or the match was wrong: the timings would mean nothing."""


def deciding_lines(i: int) -> list[str]:
    """Failure ``i``'s deciding lines as a run reads them: with what varies in them."""
    return [
        f"2026-12-07T11:{i % 60:02d}:03Z src/mod_{i}.py:{40 + i % 7}: error: widget_{i} "
        f"rejected frame 0x{i:08x} after {i % 9}.{i % 10}s",
        f"Caused by: /home/runner/work/app/app/lib/part_{i}.py: part_{i} is not ready",
    ]


def entry(i: int) -> PlaybookEntry:
    signature = signature_of(STAGE, CHECK, "code", deciding_lines(i))
    provenance = tuple(
        Provenance(
            run_id=f"APP-{i}-20261207T1{n}0000Z-aaaa",
            ticket_id=f"APP-{i}",
            verdict=1,
            source="model",
            approved_by="auto",
            outcome="mechanical-fix green",
            at=AT,
        )
        for n in range(2)
    )
    return PlaybookEntry(
        id=entry_id_for(signature, "mechanical-fix"),
        status=EntryStatus.PROMOTED,
        description=f"widget_{i} rejects a frame until part_{i} is regenerated",
        match=Match(stage=STAGE, check=CHECK, failure_class="code", signature=signature.lines),
        decision={
            "action": "mechanical-fix",
            "summary": f"regenerate part_{i} before the tests",
            "repair_plan": {
                "verification_check": "project-tests",
                "commands": [f"python -m tools.regen part_{i}", "git -C <clone> add -A"],
            },
        },
        provenance=provenance,
        promoted_by="auto: 2 agreeing outcomes",
        promoted_at=AT,
        revision=3,
    )


def decide(root: Path, i: int) -> tuple[float, float, float, str | None]:
    """One decision's playbook work: (load, signature, match) seconds, the entry found."""
    failure = Failure(check=CHECK, output="…", ticket_title="t")
    started = time.perf_counter()
    playbook = load_playbook(store_for(root), lambda note: print(note, file=sys.stderr))
    loaded = time.perf_counter()
    signature = signature_of(STAGE, CHECK, "code", deciding_lines(i))
    signed = time.perf_counter()
    found = playbook.match(failure, signature, stage=STAGE)
    matched = time.perf_counter()
    return loaded - started, signed - loaded, matched - signed, found.entry if found else None


COLD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import bench_playbook as b
root, i = Path(sys.argv[1]), int(sys.argv[2])
load, sign, match, found = b.decide(root, i)
print(json.dumps([load + sign + match, found]))
"""


def cold(root: Path, i: int) -> tuple[float, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", COLD, str(root), str(i), str(Path(__file__).parent)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchError(f"the cold decision failed: {done.stderr[-500:]}")
    took, found = json.loads(done.stdout)
    return float(took), found


def expect(found: str | None, wanted: str | None) -> None:
    if found != wanted:
        raise BenchError(f"the match found {found!r}, not {wanted!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    args = parser.parse_args(argv)
    warm_trials = 51 if args.quick else 301
    cold_trials = 5 if args.quick else 21
    ids = [entry(i).id for i in range(ENTRIES)]
    with tempfile.TemporaryDirectory(prefix="bench-playbook-") as tmp:
        big, none = Path(tmp) / "big", Path(tmp) / "none"
        big.mkdir()
        none.mkdir()
        store = store_for(big)
        for i in range(ENTRIES):
            store.write(entry(i))
        # Parsing every file, as a decision did before the index (and `playbook list`).
        started = time.perf_counter()
        every = store.entries()
        parse_all = time.perf_counter() - started
        if len(every) != ENTRIES + 1:
            raise BenchError(f"{len(every)} entries read, not {ENTRIES + 1}")
        decide(big, 0)  # the index made (making its file moves the directory too)
        time.sleep(SETTLE_S)  # the directory settles, as it does between runs that change it
        try:
            # warm-up, and the check that both sides decide what they should
            expect(decide(big, 7)[3], ids[7])
            expect(decide(none, 7)[3], None)
            parts: list[tuple[float, float, float]] = []
            warm_big, warm_none = [], []
            for t in range(warm_trials):
                i = (t * 37) % ENTRIES
                load, sign, match, found = decide(big, i)
                expect(found, ids[i])
                parts.append((load, sign, match))
                warm_big.append(load + sign + match)
                load, sign, match, found = decide(none, i)
                expect(found, None)
                warm_none.append(load + sign + match)
            cold_big, cold_none = [], []
            for t in range(cold_trials):
                i = (t * 101) % ENTRIES
                took, found = cold(big, i)
                expect(found, ids[i])
                cold_big.append(took)
                took, found = cold(none, i)
                expect(found, None)
                cold_none.append(took)
            # The first decision after the directory changed: one entry written anew.
            rescans = []
            for t in range(3):
                store.write(entry(t).revised(description=f"edited {t}"))
                load, sign, match, found = decide(big, t)
                expect(found, ids[t])
                rescans.append(load + sign + match)
        except BenchError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    ms = 1000.0
    m_warm, m_warm_none = statistics.median(warm_big), statistics.median(warm_none)
    m_cold, m_cold_none = statistics.median(cold_big), statistics.median(cold_none)
    load_ms, sign_ms, match_ms = (statistics.median(p[k] for p in parts) * ms for k in range(3))
    added_warm, added_cold = (m_warm - m_warm_none) * ms, (m_cold - m_cold_none) * ms
    print(
        f"playbook match ({ENTRIES} promoted entries; {warm_trials} warm and {cold_trials} "
        "cold trials, interleaved with the baseline)"
    )
    print(f"  warm, {ENTRIES} entries      median {m_warm * ms:7.2f} ms")
    print(f"  warm, built-in only     median {m_warm_none * ms:7.2f} ms")
    print(f"    parts (1,000)         load {load_ms:.2f} ms, signature {sign_ms:.2f} ms, "
          f"match {match_ms:.2f} ms (reads the matched file)")  # fmt: skip
    print(f"  cold, {ENTRIES} entries      median {m_cold * ms:7.2f} ms (a fresh interpreter)")
    print(f"  cold, built-in only     median {m_cold_none * ms:7.2f} ms")
    print(f"  after a change          median {statistics.median(rescans) * ms:7.2f} ms "
          "(one file written: every file stat()ed, it parsed; no target)")  # fmt: skip
    print(f"  reading every file      {parse_all * ms:7.1f} ms (entries(): before the index; "
          "`playbook list`; no target)")  # fmt: skip
    print(f"  load average            {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    checks = [
        (f"warm: <= {TARGET_MS:g} ms more than the baseline (+{added_warm:.2f} ms)",
         added_warm <= TARGET_MS),
        (f"cold: <= {TARGET_MS:g} ms more than the baseline (+{added_cold:.2f} ms)",
         added_cold <= TARGET_MS),
    ]  # fmt: skip
    print("summary")
    for label, ok in checks:
        print(f"  {label}   {'PASS' if ok else 'FAIL'}")
    print(f"  {sum(ok for _, ok in checks)}/{len(checks)} targets met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
