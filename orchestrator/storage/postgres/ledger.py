"""The decision ledger in PostgreSQL (``PostgresLedger``), and moving a ledger between a
file and the database (``export_ledger``, ``import_ledger``).

Same rows, same bytes, same hashes
    A row is stored as the very line the file ledger would write (``ledger_rows.line``,
    without its newline), made by the file ledger's own ``encode_row``; ``verify`` walks
    those lines with the file ledger's own ``check_lines``. So a ledger exported to a file
    is byte for byte the file the file ledger would have written, and either verify
    accepts what the other wrote, with the same messages for the same damage.

Appending is one transaction
    Lock the head row (``SELECT ... FOR UPDATE``), read the last row, encode the next one,
    insert it, move the head (with its HMAC when keyed), commit. Appenders on any number
    of machines queue on the head row's lock, so no Redis lock is needed; a failed append
    leaves nothing behind (there is no torn line to repair).

Connections
    Each operation opens a connection from the factory and closes it when done: nothing is
    held across a fork (a Celery prefork worker) or an idle hour. Readers use a
    ``REPEATABLE READ`` read-only snapshot, so the head and the rows they see agree.
    Errors from the driver leave this module as ``LedgerError``. psycopg is imported when
    a connection is first used, as in ``connect``: importing this module does not need it.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.ledger import (
    ZERO_HASH,
    ActionHistory,
    Head,
    Ledger,
    LedgerError,
    LedgerRow,
    RecordedOutcome,
    RepairResult,
    VerifyResult,
    check_lines,
    encode_row,
    head_mac,
    history_by_scan,
    read_head,
    recent_outcomes_by_scan,
    utc_now,
    write_head,
)
from orchestrator.storage.postgres.session import (
    ConnectionFactory,
    connection_factory,
    transaction,
)

if TYPE_CHECKING:
    import psycopg

# What a message names where the file ledger names its head file.
HEAD_NAME = "ledger_head"
_ROW_POINTS = {
    "decision": CrashPoint.LEDGER_DECISION,
    "outcome": CrashPoint.LEDGER_OUTCOME,
    "trace": CrashPoint.LEDGER_TRACE,
}


class PostgresLedger:
    """The ledger in one PostgreSQL database (migrated: ``0002_ledger.sql``).

    ``source``: a ``postgresql://`` URL (connected through ``connect``), or a function
    returning a new connection (not in autocommit, or in it: each operation is one
    ``conn.transaction()`` either way)."""

    # Where it is, as ``ledger show`` and ``ledger repair`` name the file ledger's files.
    path = "the PostgreSQL ledger (table ledger_rows)"
    head_path = "the PostgreSQL ledger's head (table ledger_head)"

    def __init__(self, source: str | ConnectionFactory, *, key: bytes | None = None) -> None:
        if key is not None and not key:
            raise ValueError("ledger key must not be empty")
        self._connect = connection_factory(source)
        self.key = key
        self.where = "ledger error: the PostgreSQL ledger"

    def _transaction(
        self, *, snapshot: bool = False
    ) -> AbstractContextManager[psycopg.Connection[Any]]:
        """One transaction; driver errors become LedgerError (a connection that cannot be
        made is connect's PostgresUnavailable, its URL masked)."""
        return transaction(self._connect, says=self.where, error=LedgerError, snapshot=snapshot)

    def append(self, row: LedgerRow) -> dict[str, Any]:
        """Append one row in one transaction and return it as stored (with seq, prev_hash,
        entry_hash; ``ts`` is now when the row has none)."""
        fields = row.content(utc_now() if row.ts is None else row.ts)
        with self._transaction() as conn:
            head = _locked_head(conn)
            if head is not None and (problem := head.mac_problem(self.key)):
                raise LedgerError(f"{self.where}: {problem}")
            seq, prev_hash = self._next(conn, head)
            stored, line = encode_row(fields, seq, prev_hash, self.key)
            entry_hash = stored["entry_hash"]
            conn.execute(
                "INSERT INTO ledger_rows (seq, line, entry_hash, prev_hash, decision_id) "
                "VALUES (%s, %s, %s, %s, %s)",
                (seq, line[:-1].decode("utf-8"), entry_hash, prev_hash, stored["decision_id"]),
            )
            mac = head_mac(self.key, seq, entry_hash) if self.key is not None else None
            conn.execute(
                "UPDATE ledger_head SET seq = %s, entry_hash = %s, hmac = %s WHERE id",
                (seq, entry_hash, mac),
            )
        if (point := _ROW_POINTS.get(row.kind)) is not None:
            crash_point(point)
        return stored

    def _next(self, conn: psycopg.Connection[Any], head: Head | None) -> tuple[int, str]:
        """(seq, prev_hash) for the next row, after checking the last row and the head
        agree (as the file ledger's append does with its last line and head file)."""
        last = conn.execute(
            "SELECT seq, line FROM ledger_rows ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        if last is None:
            if head is not None:
                raise LedgerError(
                    f"{self.where}: empty, but the head records {head.seq} entries "
                    "(truncated?); run `orchestrator ledger verify`"
                )
            return 1, ZERO_HASH
        seq, line = last
        try:
            stored = json.loads(line)
            entry_hash, prev_hash = stored["entry_hash"], stored["prev_hash"]
            agrees_with_itself = stored["seq"] == seq
        except (ValueError, TypeError, KeyError):
            agrees_with_itself = False
        if not agrees_with_itself:
            raise LedgerError(
                f"{self.where}: the last row (seq {seq}) is not a ledger line; refusing to "
                "extend it; run `orchestrator ledger verify`"
            )
        if head is None:
            agrees = seq == 1
        else:
            agrees = (head.seq, head.entry_hash) == (seq, entry_hash) or (
                head.seq == seq - 1 and head.entry_hash == prev_hash  # imported so
            )
        if not agrees:
            recorded = "there is no head" if head is None else f"the head records seq {head.seq}"
            if head is not None and head.seq == seq:
                recorded = f"the head records a different entry_hash for seq {seq}"
            raise LedgerError(
                f"{self.where}: ends at seq {seq} but {recorded} (truncated or rewritten?); "
                "refusing to append; run `orchestrator ledger verify`"
            )
        return seq + 1, entry_hash

    def append_outcome(
        self, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> dict[str, Any]:
        """Record what happened to a decision: a new ``outcome`` row that supersedes it."""
        return self.append(LedgerRow.outcome_of(decision_row, outcome, ts=ts))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row, first to last, as stored (one snapshot, streamed)."""
        with self._transaction(snapshot=True) as conn:
            for line in _lines(conn):
                yield json.loads(line)

    def recent(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` rows, oldest first."""
        if n <= 0:
            return []
        with self._transaction(snapshot=True) as conn:
            found = conn.execute(
                "SELECT line FROM ledger_rows ORDER BY seq DESC LIMIT %s", (n,)
            ).fetchall()
        return [json.loads(line) for (line,) in reversed(found)]

    def rows_of(self, decision_id: str) -> list[dict[str, Any]]:
        """Every row of one decision, oldest first, through the decision_id index (checked
        against the line itself: the column is only a copy)."""
        with self._transaction(snapshot=True) as conn:
            found = conn.execute(
                "SELECT line FROM ledger_rows WHERE decision_id = %s ORDER BY seq",
                (decision_id,),
            ).fetchall()
        rows = [json.loads(line) for (line,) in found]
        return [r for r in rows if r.get("decision_id") == decision_id]

    def history(self, signature: str) -> dict[str, ActionHistory]:
        """Per action: the outcomes recorded for decisions about this failure signature
        (the scan's answer over only the rows that can count: ``_about``)."""
        return history_by_scan(self._about(signature), signature)

    def recent_outcomes(self, signature: str, last: int) -> dict[str, list[RecordedOutcome]]:
        """Per action: the latest ``last`` outcomes for this failure signature."""
        return recent_outcomes_by_scan(self._about(signature), signature, last)

    def _about(self, signature: str) -> list[dict[str, Any]]:
        """The decision rows about ``signature`` that have an outcome, and those outcomes,
        in ledger order: every row the scan would credit, found through the indexes of
        migration 0006 rather than by reading the ledger. The scan itself then judges
        them, so a row the SQL lets through that the scan would not count is not counted
        (a signature that is not text, an outcome before its decision)."""
        with self._transaction(snapshot=True) as conn:
            found = conn.execute(
                "SELECT d.seq, d.line, o.seq, o.line FROM ledger_rows d "
                "JOIN ledger_rows o ON ledger_member(o.line, 'supersedes') = d.entry_hash "
                "AND ledger_member(o.line, 'kind') = 'outcome' AND o.seq > d.seq "
                "WHERE ledger_member(d.line, 'kind') = 'decision' "
                "AND ledger_member(d.line, 'decision', 'signature') = %s",
                (signature,),
            ).fetchall()
        by_seq: dict[int, str] = {}
        for decision_seq, decision, outcome_seq, outcome in found:
            by_seq[int(decision_seq)] = decision
            by_seq[int(outcome_seq)] = outcome
        return [json.loads(by_seq[seq]) for seq in sorted(by_seq)]

    def verify(self) -> VerifyResult:
        """Check every row, the chain and the head, exactly as the file ledger's verify
        does (the same checks, the same messages)."""
        with self._transaction(snapshot=True) as conn:
            return check_lines(_lines(conn), _head(conn), self.key, head_name=HEAD_NAME).result

    def repair(self) -> RepairResult:
        """Nothing is ever torn here (an append commits whole or not at all): bring a head
        one row behind (as an import can leave it) up to date, and refuse anything else,
        as the file ledger's repair does."""
        with self._transaction() as conn:
            head = _locked_head(conn)
            before = check_lines(_lines(conn), head, self.key, head_name=HEAD_NAME)
            if not before.result.ok:
                where = f"line {before.result.line}: " if before.result.line is not None else ""
                raise LedgerError(
                    f"{self.where}: refusing to repair: {where}{before.result.reason}. "
                    "This is damage or tampering: keep the database as evidence and "
                    "restore from a backup"
                )
            head_fixed = before.count > 0 and (head is None or head.seq != before.count)
            if head_fixed:
                mac = head_mac(self.key, before.count, before.last_hash) if self.key else None
                conn.execute(
                    "UPDATE ledger_head SET seq = %s, entry_hash = %s, hmac = %s WHERE id",
                    (before.count, before.last_hash, mac),
                )
        return RepairResult(None, None, 0, before.count, head_fixed)


def _lines(conn: psycopg.Connection[Any]) -> Iterator[bytes]:
    """Every row's line as the file holds it (with its newline), in seq order, streamed
    through a server-side cursor (the caller's transaction holds it open)."""
    with conn.cursor(name="ledger_lines") as cur:
        cur.itersize = 2000
        cur.execute("SELECT line FROM ledger_rows ORDER BY seq")
        for (line,) in cur:
            yield line.encode("utf-8") + b"\n"


def _head_of(found: tuple[Any, ...] | None) -> Head | None:
    if found is None:  # the migration's row was deleted (only with the triggers off)
        return None
    seq, entry_hash, mac = found
    return None if seq == 0 else Head(seq, entry_hash, mac)


def _head(conn: psycopg.Connection[Any]) -> Head | None:
    return _head_of(conn.execute("SELECT seq, entry_hash, hmac FROM ledger_head").fetchone())


def _locked_head(conn: psycopg.Connection[Any]) -> Head | None:
    """The head, locked until the transaction ends: what serialises appenders."""
    found = conn.execute("SELECT seq, entry_hash, hmac FROM ledger_head FOR UPDATE").fetchone()
    if found is None:
        raise LedgerError(
            "ledger error: the PostgreSQL ledger: its head row is missing; "
            "run `orchestrator ledger verify`"
        )
    return _head_of(found)


def export_ledger(ledger: PostgresLedger, path: Path) -> VerifyResult:
    """Write the PostgreSQL ledger as a file ledger at ``path`` (and its head file beside
    it), from one snapshot; refuse a ledger that does not verify, and a ``path`` or head
    file that already exists. Returns the file ledger's own verify of what was written."""
    head_path = path.with_suffix(".head")
    if head_path.exists():
        raise LedgerError(f"ledger error: {head_path}: already exists; refusing to overwrite")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise LedgerError(f"ledger error: {path}: already exists; refusing to overwrite") from None
    try:
        with os.fdopen(fd, "wb") as fh, ledger._transaction(snapshot=True) as conn:

            def written() -> Iterator[bytes]:
                for line in _lines(conn):
                    fh.write(line)
                    yield line

            checked = check_lines(written(), _head(conn), ledger.key, head_name=HEAD_NAME)
            if not checked.result.ok:
                where = f"line {checked.result.line}: " if checked.result.line is not None else ""
                raise LedgerError(
                    f"{ledger.where}: refusing to export: {where}{checked.result.reason}"
                )
            fh.flush()
            os.fsync(fh.fileno())
        if checked.head is not None:
            write_head(head_path, checked.head.seq, checked.head.entry_hash, ledger.key)
    except BaseException:
        path.unlink(missing_ok=True)
        head_path.unlink(missing_ok=True)
        raise
    return Ledger(path, key=ledger.key).verify()


def import_ledger(path: Path, ledger: PostgresLedger) -> VerifyResult:
    """Load the file ledger at ``path`` (with its head file) into an empty PostgreSQL
    ledger, in one transaction. Refuses a file that does not verify (with the file
    verify's own message) and a target that already holds rows. Returns the verify of the
    loaded rows, run inside the same transaction before it commits.

    Nothing may append to the file meanwhile: stop the writers first."""
    head_path = path.with_suffix(".head")
    head = read_head(head_path)
    try:
        # Split as the file ledger reads it: at newlines only.
        lines = list(io.BytesIO(path.read_bytes()))
    except FileNotFoundError:
        raise LedgerError(f"ledger error: {path}: no such ledger") from None
    checked = check_lines(lines, head, ledger.key, head_name=str(head_path)).result
    if not checked.ok:
        where = f"line {checked.line}: " if checked.line is not None else ""
        raise LedgerError(f"ledger error: {path}: refusing to import: {where}{checked.reason}")
    with ledger._transaction() as conn:
        target = _locked_head(conn)
        held = conn.execute("SELECT count(*) FROM ledger_rows").fetchone()
        if target is not None or (held is not None and held[0] > 0):
            raise LedgerError(
                f"{ledger.where}: refusing to import into a ledger that is not empty "
                f"({held[0] if held else 0} rows)"
            )
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY ledger_rows (seq, line, entry_hash, prev_hash, decision_id) FROM STDIN"
            ) as copy,
        ):
            for line in lines:
                row = json.loads(line)
                copy.write_row(
                    (
                        row["seq"],
                        line[:-1].decode("utf-8"),
                        row["entry_hash"],
                        row["prev_hash"],
                        str(row["decision_id"]),
                    )
                )
        if head is not None:
            conn.execute(
                "UPDATE ledger_head SET seq = %s, entry_hash = %s, hmac = %s WHERE id",
                (head.seq, head.entry_hash, head.mac),
            )
        loaded = check_lines(_lines(conn), _head(conn), ledger.key, head_name=HEAD_NAME).result
        if loaded != checked:
            raise LedgerError(f"{ledger.where}: the imported rows do not verify: {loaded}")
    return loaded


if TYPE_CHECKING:
    from orchestrator.storage.protocols import DecisionLedger

    def _implements_the_protocol(ledger: PostgresLedger) -> DecisionLedger:
        """Never called: mypy checks here that the ledger fits the ledger's protocol."""
        return ledger
