"""The ledger's index: what lets a decision ask "how did this failure signature's past
decisions end?" and "which rows belong to this decision?" without reading the ledger.

A cache, never a source of truth. It lives beside the ledger (``ledger.index.sqlite3``)
and records which prefix of the ledger it covers: the byte offset where that prefix
ends, and the ``seq`` and ``entry_hash`` of the last row in it. The ledger is hash-chained,
so that entry_hash commits to every byte before it.

Why it cannot lie
    * Every look-up first ``sync``s, holding the ledger's exclusive lock (the one every
      append holds): the line that ends at the covered offset must still be the covered
      row (same seq, same entry_hash). If it is not, or the file is shorter, the ledger
      was truncated, repaired or rewritten: the index is dropped and rebuilt from the
      first line. A missing, unreadable or older-format index is rebuilt the same way.
    * If the ledger has grown past the covered offset (an append whose index update was
      lost to a crash, or a ledger written by an older version), the rows after it, and
      only those, are read and added.
    * Rows and the new coverage are written in one sqlite transaction, so the index is
      always exactly "the ledger up to its covered offset", never half of an update.
    * A kill between the ledger append and the index update therefore leaves an index
      one row behind, which the next look-up catches up.
  ``ledger verify`` stays the authority on whether the ledger itself is intact.

What it keeps
    history   (signature, action) -> outcomes recorded, and how many were green, for
              decision rows and the outcome rows that supersede them: one row per pair,
              so a look-up costs the same with a million ledger rows as with none
    decisions entry_hash -> (signature, action) of each decision row, to credit an
              outcome row to its decision
    placed    a 64-bit key of each row's decision_id -> the row's offset and length
    outcomes  (signature, action, seq) -> the outcome row's time and whether it was green:
              the latest few per pair are read by primary key, newest first, so
              confidence can weigh outcomes by age without reading the ledger
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.storage.ledger.lines import line_start, pread

# A mechanical fix whose verification passed is recorded as "mechanical-fix green: ...".
GREEN_OUTCOME = "mechanical-fix green"
INDEX_VERSION = "2"  # 2: the outcomes table
_ZERO_HASH = "0" * 64  # the prev_hash of the first row
_READ_CHUNK = 1 << 20
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS decisions (
    entry_hash TEXT PRIMARY KEY, signature TEXT, action TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    signature TEXT NOT NULL, action TEXT NOT NULL, green INTEGER NOT NULL, total INTEGER NOT NULL,
    PRIMARY KEY (signature, action)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outcomes (
    signature TEXT NOT NULL, action TEXT NOT NULL, seq INTEGER NOT NULL, ts TEXT NOT NULL,
    green INTEGER NOT NULL, PRIMARY KEY (signature, action, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS placed (
    decision_key INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL,
    PRIMARY KEY (decision_key, offset)
) WITHOUT ROWID;
"""
_TABLES = ("meta", "decisions", "history", "placed", "outcomes")


@dataclass(frozen=True)
class ActionHistory:
    """Outcomes recorded for one action's decisions about one failure signature."""

    green: int
    total: int


@dataclass(frozen=True)
class RecordedOutcome:
    """One outcome row of a decision about a signature: its seq, time (as the row says it)
    and whether it was green."""

    seq: int
    ts: str
    green: bool


class UnreadableRow(Exception):
    """A complete line before the ledger's end is not JSON: damage, which the index does
    not paper over (``ledger verify`` says where)."""

    def __init__(self, line: int) -> None:
        super().__init__(f"line {line} is not valid JSON")
        self.line = line


@dataclass(frozen=True)
class Coverage:
    """The ledger prefix the index holds: rows 1..seq, bytes [0, end)."""

    seq: int
    entry_hash: str
    end: int


def decision_key(decision_id: str) -> int:
    """A decision id as a signed 64-bit integer: an eighth of the space of the text. A
    collision only costs reading a row that is then filtered out."""
    return int.from_bytes(hashlib.sha256(decision_id.encode("utf-8")).digest()[:8], signed=True)


def decision_subject(row: Mapping[str, Any]) -> tuple[str | None, str]:
    """(signature, action) a decision row is about: what its outcomes are credited to.
    A signature that is not text can never be asked for (it is None here)."""
    decision = row.get("decision")
    decision = decision if isinstance(decision, dict) else {}
    verdict = decision.get("verdict")
    verdict = verdict if isinstance(verdict, dict) else {}
    signature = decision.get("signature", "")
    action = verdict.get("action", "")
    return (signature if isinstance(signature, str) else None), str(action)


def is_green(row: Mapping[str, Any]) -> bool:
    return str(row.get("outcome", "")).startswith(GREEN_OUTCOME)


def outcomes_by_scan(
    rows: Iterable[Mapping[str, Any]], signature: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each outcome row credited to a decision about ``signature``, with that decision's
    action, in ledger order: what both scans below count, from every row."""
    decisions: dict[str, tuple[str | None, str]] = {}
    for row in rows:
        kind = row.get("kind")
        if kind == "decision":
            decisions[str(row.get("entry_hash"))] = decision_subject(row)
        elif kind == "outcome" and isinstance(supersedes := row.get("supersedes"), str):
            subject = decisions.get(supersedes)
            if subject is not None and subject[0] == signature:
                yield subject[1], row


def history_by_scan(rows: Iterable[Mapping[str, Any]], signature: str) -> dict[str, ActionHistory]:
    """The same answer as the index, from every row: for a ledger the index cannot be kept
    beside (a read-only copy), and the definition the index is tested against."""
    green: dict[str, int] = {}
    total: dict[str, int] = {}
    for action, row in outcomes_by_scan(rows, signature):
        total[action] = total.get(action, 0) + 1
        if is_green(row):
            green[action] = green.get(action, 0) + 1
    return {a: ActionHistory(green=green.get(a, 0), total=n) for a, n in total.items()}


def recent_outcomes_by_scan(
    rows: Iterable[Mapping[str, Any]], signature: str, last: int
) -> dict[str, list[RecordedOutcome]]:
    """Per action, the ``last`` latest outcomes recorded for this signature, newest first:
    the index's answer, from every row."""
    found: dict[str, list[RecordedOutcome]] = {}
    for action, row in outcomes_by_scan(rows, signature):
        if type(row.get("seq")) is int:
            found.setdefault(action, []).append(
                RecordedOutcome(row["seq"], str(row.get("ts", "")), is_green(row))
            )
    return {a: sorted(o, key=lambda x: -x.seq)[:last] for a, o in found.items()}


class LedgerIndex:
    """The index file of one ledger. Callers hold the ledger's exclusive lock around
    ``sync``, ``added`` and every look-up, so the ledger cannot move under them."""

    def __init__(self, path: Path, ledger_path: Path) -> None:
        self.path = path
        self.ledger_path = ledger_path

    # ------------------------------------------------------------------ connection

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection to a usable index: a file sqlite cannot read, or of another
        version, is deleted and started afresh (it is a cache)."""
        for attempt in (1, 2):
            db = sqlite3.connect(self.path, isolation_level=None)
            try:
                # WAL with NORMAL sync cannot corrupt on a crash; it may lose the last
                # transactions on power loss, which leaves the index behind: caught up.
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                version = db.execute("SELECT value FROM meta WHERE name='version'").fetchone()
                if version is None or version[0] != INDEX_VERSION:
                    self._reset(db)
            except sqlite3.OperationalError:
                db.close()  # locked, read-only, out of space: not a damaged file
                raise
            except sqlite3.DatabaseError:
                db.close()
                if attempt == 2:
                    raise
                self._delete()
                continue
            with closing(db):
                yield db
            return

    def discard(self) -> None:
        """Delete the index; the next look-up rebuilds it from the ledger."""
        self._delete()

    def _delete(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    @staticmethod
    def _reset(db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        for table in _TABLES:
            db.execute(f"DELETE FROM {table}")  # fixed names, no input
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("version", INDEX_VERSION), ("seq", "0"), ("entry_hash", ""), ("end", "0")],
        )
        db.execute("COMMIT")

    @classmethod
    def _coverage(cls, db: sqlite3.Connection) -> Coverage:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        try:
            return Coverage(int(meta["seq"]), str(meta["entry_hash"]), int(meta["end"]))
        except (KeyError, ValueError):  # not written by this code: start again
            cls._reset(db)
            return Coverage(0, "", 0)

    # ------------------------------------------------------------------ keeping up

    def sync(self) -> Coverage:
        """Bring the index to the ledger's last complete line (see the module docstring)."""
        with self._open() as db:
            return self._sync(db)

    def added(self, row: Mapping[str, Any], offset: int, length: int) -> None:
        """The row just appended at ``offset``, added when the index holds exactly the rows
        before it (it chains onto the covered row): one short transaction. Otherwise the
        index is left as it is, for the next look-up to catch up: an append stays a read
        of the ledger's last line, never of the whole file."""
        with self._open() as db:
            cover = self._coverage(db)
            chains = row.get("prev_hash") == (cover.entry_hash or _ZERO_HASH)
            if cover.end == offset and cover.seq == row.get("seq", 0) - 1 and chains:
                db.execute("BEGIN IMMEDIATE")
                self._ingest(db, [(row, offset, length)])
                self._cover(db, row, offset + length)
                db.execute("COMMIT")

    def _sync(self, db: sqlite3.Connection) -> Coverage:
        try:
            fd = os.open(self.ledger_path, os.O_RDONLY)
        except FileNotFoundError:
            fd = -1
        try:
            size = os.fstat(fd).st_size if fd >= 0 else 0
            cover = self._coverage(db)
            if cover.end and not self._still_covers(fd, size, cover):
                self._reset(db)  # truncated, repaired or rewritten: start again
                cover = self._coverage(db)
            if size > cover.end:
                cover = self._catch_up(db, fd, cover, size)
            return cover
        finally:
            if fd >= 0:
                os.close(fd)

    @staticmethod
    def _still_covers(fd: int, size: int, cover: Coverage) -> bool:
        """Is the line ending at ``cover.end`` still the covered row?"""
        if fd < 0 or size < cover.end:
            return False
        start = line_start(fd, cover.end - 1)
        try:
            last = json.loads(pread(fd, cover.end - start, start))
        except ValueError:
            return False
        return (
            isinstance(last, dict)
            and last.get("seq") == cover.seq
            and last.get("entry_hash") == cover.entry_hash
        )

    def _catch_up(self, db: sqlite3.Connection, fd: int, cover: Coverage, size: int) -> Coverage:
        """Add the complete lines in [cover.end, size), in one transaction. A torn last
        line (an append in progress elsewhere cannot be: we hold the lock) is left out,
        as ``Ledger.rows`` leaves it out."""
        db.execute("BEGIN IMMEDIATE")
        try:
            offset, line_no, carry = cover.end, cover.seq, b""
            pos, last_row, end = cover.end, None, cover.end
            batch: list[tuple[Mapping[str, Any], int, int]] = []
            while pos < size:
                chunk = pread(fd, min(_READ_CHUNK, size - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                lines = (carry + chunk).split(b"\n")
                carry = lines.pop()  # the part after the last newline: not yet a line
                for i, line in enumerate(lines):
                    line_no += 1
                    length = len(line) + 1
                    try:
                        row = json.loads(line)
                    except ValueError:
                        if pos >= size and i == len(lines) - 1 and not carry:
                            break  # a torn last line that happens to end in a newline
                        raise UnreadableRow(line_no) from None
                    if not isinstance(row, dict):
                        raise UnreadableRow(line_no)
                    batch.append((row, offset, length))
                    offset += length
                    last_row, end = row, offset
                if len(batch) >= 10_000:
                    self._ingest(db, batch)
                    batch = []
            self._ingest(db, batch)
            if last_row is not None:
                self._cover(db, last_row, end)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self._coverage(db)

    @staticmethod
    def _cover(db: sqlite3.Connection, row: Mapping[str, Any], end: int) -> None:
        # A row without an integer seq is damage (verify says so): recorded as -1, which no
        # row matches, so every look-up re-reads rather than trusts what follows it.
        seq = row.get("seq")
        db.executemany(
            "UPDATE meta SET value = ? WHERE name = ?",
            [(str(seq if type(seq) is int else -1), "seq"),
             (str(row.get("entry_hash")), "entry_hash"), (str(end), "end")],
        )  # fmt: skip

    @staticmethod
    def _ingest(db: sqlite3.Connection, rows: list[tuple[Mapping[str, Any], int, int]]) -> None:
        placed = []
        decisions = []
        outcomes: list[tuple[str, str, int, str, int]] = []
        counts: dict[tuple[str, str], list[int]] = {}
        subjects: dict[str, tuple[str | None, str]] = {}
        for row, offset, length in rows:
            decision_id = row.get("decision_id")
            if isinstance(decision_id, str):
                placed.append((decision_key(decision_id), offset, length))
            kind = row.get("kind")
            if kind == "decision":
                entry_hash = str(row.get("entry_hash"))
                subject = decision_subject(row)
                subjects[entry_hash] = subject
                decisions.append((entry_hash, subject[0], subject[1]))
            elif kind == "outcome" and isinstance(supersedes := row.get("supersedes"), str):
                found = subjects.get(supersedes)
                if found is None:
                    got = db.execute(
                        "SELECT signature, action FROM decisions WHERE entry_hash = ?",
                        (supersedes,),
                    ).fetchone()
                    found = (got[0], got[1]) if got else None
                if found is None or found[0] is None:
                    continue
                tally = counts.setdefault((found[0], found[1]), [0, 0])
                tally[0] += is_green(row)
                tally[1] += 1
                if type(seq := row.get("seq")) is int:
                    outcomes.append(
                        (found[0], found[1], seq, str(row.get("ts", "")), int(is_green(row)))
                    )
        db.executemany("INSERT OR REPLACE INTO placed VALUES (?, ?, ?)", placed)
        db.executemany("INSERT OR REPLACE INTO decisions VALUES (?, ?, ?)", decisions)
        db.executemany("INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?, ?, ?)", outcomes)
        db.executemany(
            "INSERT INTO history VALUES (?, ?, ?, ?) ON CONFLICT (signature, action) DO UPDATE "
            "SET green = green + excluded.green, total = total + excluded.total",
            [(sig, action, g, t) for (sig, action), (g, t) in counts.items()],
        )

    # ------------------------------------------------------------------ look-ups

    def history(self, signature: str) -> dict[str, ActionHistory]:
        """Per action, after a ``sync``."""
        with self._open() as db:
            self._sync(db)
            found = db.execute(
                "SELECT action, green, total FROM history WHERE signature = ?", (signature,)
            ).fetchall()
        return {action: ActionHistory(green=g, total=t) for action, g, t in found}

    def recent_outcomes(self, signature: str, last: int) -> dict[str, list[RecordedOutcome]]:
        """Per action, the ``last`` latest outcomes for ``signature``, newest first, after a
        ``sync``: one primary-key range read per action, whatever the ledger's size."""
        with self._open() as db:
            self._sync(db)
            actions = [
                action
                for (action,) in db.execute(
                    "SELECT action FROM history WHERE signature = ?", (signature,)
                ).fetchall()
            ]
            found = {
                action: [
                    RecordedOutcome(seq, ts, bool(green))
                    for seq, ts, green in db.execute(
                        "SELECT seq, ts, green FROM outcomes WHERE signature = ? AND action = ? "
                        "ORDER BY seq DESC LIMIT ?",
                        (signature, action, last),
                    ).fetchall()
                ]
                for action in actions
            }
        return {action: outcomes for action, outcomes in found.items() if outcomes}

    def places(self, decision_id: str) -> list[tuple[int, int]]:
        """(offset, length) of every row whose decision id hashes like ``decision_id``, in
        ledger order, after a ``sync``. The caller filters out collisions."""
        with self._open() as db:
            self._sync(db)
            found = db.execute(
                "SELECT offset, length FROM placed WHERE decision_key = ? ORDER BY offset",
                (decision_key(decision_id),),
            ).fetchall()
        return [(offset, length) for offset, length in found]
