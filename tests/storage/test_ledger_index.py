"""The ledger's index answers exactly what a scan of every row answers, and cannot be left
lying: behind, it catches up from the tail; disagreeing, it is rebuilt; killed half-way,
the next look-up repairs it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from orchestrator.app.ledger_link import LedgerLink
from orchestrator.domain.proposals import History
from orchestrator.storage.ledger import ActionHistory, Ledger, LedgerError

from conftest import ROOT, examples, subprocess_env
from support.ledger_rows import ACTIONS, SIGNATURES, conclude, decide, ledger_steps, play


def scanned_history(ledger: Ledger, signature: str) -> dict[str, History]:
    """The confidence history as it was computed before the index: a pass over every row
    (kept here, verbatim in behaviour, as the oracle)."""
    decisions: dict[str, tuple[str, str]] = {}
    green: dict[str, int] = {}
    total: dict[str, int] = {}
    for row in ledger.rows():
        decision = row.get("decision") or {}
        if row.get("kind") == "decision":
            verdict = decision.get("verdict") or {}
            decisions[row["entry_hash"]] = (
                decision.get("signature", ""),
                verdict.get("action", ""),
            )
        elif row.get("kind") == "outcome" and row.get("supersedes") in decisions:
            sig, action = decisions[row["supersedes"]]
            if sig != signature:
                continue
            total[action] = total.get(action, 0) + 1
            if str(row.get("outcome", "")).startswith("mechanical-fix green"):
                green[action] = green.get(action, 0) + 1
    return {a: History(green=green.get(a, 0), total=n) for a, n in total.items()}


def coverage(ledger: Ledger) -> int:
    """The seq the index file says it covers (read with sqlite directly, not through it)."""
    with sqlite3.connect(ledger.index.path) as db:
        return int(db.execute("SELECT value FROM meta WHERE name = 'seq'").fetchone()[0])


def populated(path: Path) -> tuple[Ledger, dict[str, Any]]:
    """Decisions about two signatures, some with outcomes; returns the last decision row."""
    ledger = Ledger(path)
    last: dict[str, Any] = {}
    for n in range(12):
        last = decide(ledger, n, SIGNATURES[n % 2], ACTIONS[n % 3])
        if n % 4 != 3:
            conclude(ledger, last, "mechanical-fix green: lint passes" if n % 2 else "failed: x")
    return ledger, last


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=ledger_steps)
def test_history_is_what_a_scan_of_every_row_computes(tmp_path_factory: Any, steps: Any) -> None:
    ledger = Ledger(tmp_path_factory.mktemp("ledger") / "ledger.jsonl")
    play(ledger, steps)
    link = LedgerLink(ledger)
    for signature in (*SIGNATURES, "never-seen"):
        assert link.history(signature) == scanned_history(ledger, signature)
    assert ledger.verify().ok


def test_history_counts_outcomes_per_action_and_green_ones(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    every = ActionHistory(green=1, total=1)
    assert ledger.history("sig-b") == {
        "mechanical-fix": every,
        "abandon-human": every,
        "retry": every,
    }
    none_green = ActionHistory(green=0, total=2)
    assert ledger.history("sig-a") == dict.fromkeys(ACTIONS, none_green)
    assert ledger.history("never-seen") == {}
    assert Ledger(tmp_path / "absent.jsonl").history("sig-a") == {}
    assert not (tmp_path / "absent.index.sqlite3").exists()  # a look-up creates nothing


def test_rows_of_a_decision_are_read_by_offset_not_by_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, last = populated(tmp_path / "ledger.jsonl")
    first_id = "T-1-20260115T120000Z-ab12:attempt-1:verdict-0"
    expected = [r for r in ledger.rows() if r["decision_id"] == first_id]

    def no_scan(self: Ledger) -> Iterator[dict[str, Any]]:
        raise AssertionError("rows_of scanned the ledger")

    monkeypatch.setattr(Ledger, "rows", no_scan)
    found = ledger.rows_of(first_id)
    assert found == expected and [r["kind"] for r in found] == ["decision", "outcome"]
    assert ledger.rows_of(last["decision_id"]) == [last]
    assert ledger.rows_of("no such decision") == []


@pytest.mark.slow
def test_an_index_left_behind_catches_up_from_the_tail_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for n in range(300):
        decide(ledger, n, f"old-{n}", "retry")
    covered = coverage(ledger)
    # Appends whose index updates were lost (a crash, or an older version writing).
    monkeypatch.setattr(Ledger, "_index_added", lambda self, row, offset, length: None)
    extra = [decide(ledger, 1000 + n, "sig-a", "retry") for n in range(3)]
    for row in extra:
        conclude(ledger, row, "mechanical-fix green: lint passes")
    monkeypatch.undo()
    assert coverage(ledger) == covered == 300
    size = ledger.path.stat().st_size
    tail = sum(len(line) for line in ledger.path.read_bytes().splitlines(keepends=True)[-6:])
    read: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, length, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    history = ledger.history("sig-a")
    monkeypatch.undo()
    assert history == {"retry": ActionHistory(green=3, total=3)}
    assert coverage(ledger) == 306
    # The covered row (found by one backwards chunk, then read) and the six new lines.
    covered_row = len(ledger.path.read_bytes().splitlines(keepends=True)[299])
    assert sum(read) <= 8192 + covered_row + tail < size // 10


def test_a_rewritten_ledger_rebuilds_the_index(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    assert ledger.history("sig-b")
    # The whole ledger is replaced (a restore, a rewrite): same place, other rows.
    ledger.path.unlink()
    ledger.head_path.unlink()
    other = Ledger(ledger.path)
    fresh = decide(other, 0, "sig-c", "split")
    conclude(other, fresh, "split into 2 sub-tickets")
    assert ledger.history("sig-b") == {}
    assert ledger.history("sig-c") == {"split": ActionHistory(green=0, total=1)}
    assert coverage(ledger) == 2


def test_a_repaired_torn_line_and_a_truncation_are_noticed(tmp_path: Path) -> None:
    ledger, last = populated(tmp_path / "ledger.jsonl")
    before = ledger.history("sig-a")
    with ledger.path.open("ab") as fh:
        fh.write(b'{"kind":"outc')  # an interrupted append
    assert ledger.history("sig-a") == before  # the torn line is no row
    ledger.repair()
    conclude(ledger, last, "mechanical-fix green: lint passes")
    assert ledger.history("sig-b") == {
        a: ActionHistory(h.green, h.total) for a, h in scanned_history(ledger, "sig-b").items()
    }
    # Cut back to fewer rows than the index covers (head file and all): rebuilt.
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    ledger.path.write_bytes(b"".join(lines[:4]))
    ledger.head_path.unlink()
    assert ledger.history("sig-a") == {
        a: ActionHistory(h.green, h.total) for a, h in scanned_history(ledger, "sig-a").items()
    }
    assert coverage(ledger) == 4


def test_a_damaged_index_file_is_rebuilt(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    expected = ledger.history("sig-b")
    ledger.index.path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{ledger.index.path}{suffix}").unlink(missing_ok=True)
    assert ledger.history("sig-b") == expected
    assert coverage(ledger) == len(list(ledger.rows()))


def test_a_middle_line_that_is_not_json_is_an_error_not_a_silent_gap(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    lines[3] = b"{not json\n"
    ledger.path.write_bytes(b"".join(lines))
    ledger.index.discard()
    with pytest.raises(LedgerError, match=r"line 4 is not valid JSON; run `orchestrator ledger"):
        ledger.history("sig-a")


def test_without_a_usable_lock_file_history_is_answered_by_a_scan(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    expected = ledger.history("sig-b")
    ledger.index.discard()
    ledger.lock_path.unlink()
    ledger.lock_path.mkdir()  # cannot be opened as a lock file: as on a read-only copy
    assert ledger.history("sig-b") == expected
    assert not ledger.index.path.exists()


KILLED_APPEND = """
import os, signal, sys
from orchestrator.storage.ledger import Ledger, LedgerIndex

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[2] == "before-index":
    Ledger._index_added = die            # the row and head are durable; the index not
else:
    LedgerIndex._cover = die               # inside the index's transaction
ledger = Ledger(__import__("pathlib").Path(sys.argv[1]))
decision = [r for r in ledger.rows() if r["kind"] == "decision"][-1]
ledger.append_outcome(decision, "mechanical-fix green: lint passes")
"""


@pytest.mark.parametrize("where", ["before-index", "inside-index-transaction"])
def test_a_kill_between_append_and_index_update_is_repaired_by_the_next_look_up(
    tmp_path: Path, where: str
) -> None:
    ledger, last = populated(tmp_path / "ledger.jsonl")
    rows = len(list(ledger.rows()))
    assert coverage(ledger) == rows
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_APPEND), str(ledger.path), where],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert ledger.verify().ok and ledger.verify().count == rows + 1  # the row is committed
    assert coverage(ledger) == rows  # ... and the index never saw it
    history = LedgerLink(Ledger(ledger.path)).history(last["decision"]["signature"])
    assert history == scanned_history(ledger, last["decision"]["signature"])
    assert history[last["decision"]["verdict"]["action"]].green >= 1
    assert coverage(ledger) == rows + 1


def test_a_ledger_from_before_the_index_gets_one_on_first_look_up(tmp_path: Path) -> None:
    ledger, last = populated(tmp_path / "ledger.jsonl")
    ledger.index.discard()  # as an older state dir has it: ledger.jsonl and ledger.head only
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ledger.head",
        "ledger.jsonl",
        "ledger.lock",
    ]
    assert ledger.rows_of(last["decision_id"]) == [last]
    assert ledger.index.path.name == "ledger.index.sqlite3" and ledger.index.path.exists()
    assert coverage(ledger) == len(list(ledger.rows()))
    assert ledger.verify().ok  # the index is beside the ledger, never in it


def test_rows_of_notices_bytes_that_moved_under_the_index(tmp_path: Path) -> None:
    ledger, _ = populated(tmp_path / "ledger.jsonl")
    second = "T-1-20260115T120000Z-ab12:attempt-1:verdict-1"  # lines 3 and 4
    expected = ledger.rows_of(second)
    assert [r["seq"] for r in expected] == [3, 4]
    # Edits in the middle that keep the file's length (so the covered last row still
    # checks out) but move line 3 by a byte. Verify reports them; the index must not
    # answer with whatever bytes now sit at its offsets.
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"routing":"auto"', b'"routing":"aut"')
    lines[3] = lines[3].replace(b'"routing":"auto"', b'"routing":"autoo"')
    ledger.path.write_bytes(b"".join(lines))
    assert not ledger.verify().ok
    assert ledger.rows_of(second) == [json.loads(lines[2]), json.loads(lines[3])]
    assert not ledger.index.path.exists()  # dropped: the next look-up rebuilds it
    assert ledger.rows_of(second) == [json.loads(lines[2]), json.loads(lines[3])]
    assert coverage(ledger) == len(lines)
