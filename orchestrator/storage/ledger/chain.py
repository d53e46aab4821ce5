"""The ledger as a hash chain: ``Ledger``, which appends a row under the lock, and
verifies and repairs the whole (``verify.py``); it reads as ``LedgerReader`` does.

Writers
    ``append`` holds an exclusive ``flock`` on ``ledger.lock`` across: read the head and
    the last line (seeking from the end; the file is never read whole), check they agree,
    compute seq/prev_hash/entry_hash, write the line with O_APPEND, fsync, replace the
    head. ``verify`` and ``repair`` take the lock too (shared / exclusive) so they see no
    half-finished append. Readers take no lock (``reading.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.ledger.encoding import (
    ZERO_HASH,
    LedgerError,
    digest,
    encode_row,
    line_body,
)
from orchestrator.storage.ledger.head import Head, read_head, write_head
from orchestrator.storage.ledger.index import UnreadableRow
from orchestrator.storage.ledger.lines import line_start, pread
from orchestrator.storage.ledger.reading import LedgerReader
from orchestrator.storage.ledger.row import LedgerRow, utc_now
from orchestrator.storage.ledger.verify import RepairResult, VerifyResult, repair, scan

_ROW_POINTS = {
    "decision": CrashPoint.LEDGER_DECISION,
    "outcome": CrashPoint.LEDGER_OUTCOME,
    "trace": CrashPoint.LEDGER_TRACE,
}


def ledger_path(state_dir: Path) -> Path:
    return StateLayout(state_dir).ledger_path


class Ledger(LedgerReader):
    """One ledger file, its head file (``.head``) and its lock file (``.lock``)."""

    def __init__(self, path: Path, *, key: bytes | None = None) -> None:
        if key is not None and not key:
            raise ValueError("ledger key must not be empty")
        super().__init__(path)
        self.head_path = path.with_suffix(".head")
        self._key = key

    def append(self, row: LedgerRow) -> dict[str, Any]:
        """Append one row and return it as stored (with seq, prev_hash, entry_hash; ``ts``
        is now when the row has none).

        Raises LedgerError when the ledger's end is torn, or disagrees with its head file
        (run ``verify``); a malformed row was refused when it was made. If the head file
        cannot be replaced after the row is durable, the error propagates but the row
        stays: it is committed, and the next append brings the head file up to it."""
        fields = row.content(utc_now() if row.ts is None else row.ts)

        with self._locked(exclusive=True, create=True):
            head = read_head(self.head_path)
            if head is not None and (problem := head.mac_problem(self._key)):
                raise LedgerError(f"ledger error: {self.path}: {problem}")
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                size = os.fstat(fd).st_size
                seq, prev_hash = self._tail_for_append(fd, size, head)
                stored, line = encode_row(fields, seq, prev_hash, self._key)
                try:
                    view = memoryview(line)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                except BaseException:
                    # A failed write (disk full, signal) must not leave half a row behind
                    # for the next append to refuse.
                    os.ftruncate(fd, size)
                    raise
            finally:
                os.close(fd)
            if created:
                # The new file's directory entry must be durable too, not just its data.
                dir_fd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
            self._write_head(seq, stored["entry_hash"])
            self._index_added(stored, size, len(line))
        if (point := _ROW_POINTS.get(row.kind)) is not None:
            crash_point(point)
        return stored

    def _write_head(self, seq: int, entry_hash: str) -> None:
        write_head(self.head_path, seq, entry_hash, self._key)

    def _index_added(self, row: Mapping[str, Any], offset: int, length: int) -> None:
        """Keep the index current, under the append's lock. The row is committed whatever
        happens here: an index left behind (an error, a kill) is caught up by the next
        look-up, so a failure here must not fail the append."""
        try:
            self.index.added(row, offset, length)
        except (sqlite3.Error, OSError, UnreadableRow):
            pass

    def append_outcome(
        self, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> dict[str, Any]:
        """Record what happened to a decision: a new ``outcome`` row that supersedes it
        (the decision row itself is never touched)."""
        return self.append(LedgerRow.outcome_of(decision_row, outcome, ts=ts))

    def _tail_for_append(self, fd: int, size: int, head: Head | None) -> tuple[int, str]:
        """(seq, prev_hash) for the next row, after checking the last line and the head
        file agree. Reads only the last line."""
        where = f"ledger error: {self.path}"
        if size == 0:
            if head is not None:
                raise LedgerError(
                    f"{where}: empty, but the head file records {head.seq} entries "
                    "(truncated?); run `orchestrator ledger verify`"
                )
            return 1, ZERO_HASH
        if pread(fd, 1, size - 1) != b"\n":
            torn = size - line_start(fd, size)
            raise LedgerError(
                f"{where}: the last line is torn ({torn} bytes without a newline: an "
                "interrupted write); refusing to append; run `orchestrator ledger repair`"
            )
        start = line_start(fd, size - 1)
        line = pread(fd, size - start, start)
        try:
            last = json.loads(line)
        except ValueError:
            raise LedgerError(
                f"{where}: the last line is torn (not valid JSON: an interrupted write); "
                "refusing to append; run `orchestrator ledger repair`"
            ) from None
        try:
            seq, entry_hash, prev_hash = last["seq"], last["entry_hash"], last["prev_hash"]
            body = line_body(line, entry_hash)
            ok = body is not None and digest(self._key, prev_hash, body) == entry_hash
        except (TypeError, KeyError, AttributeError, UnicodeEncodeError):
            ok = False
        if not ok or type(seq) is not int:
            raise LedgerError(
                f"{where}: the last row's entry_hash does not verify; refusing to extend it; "
                "run `orchestrator ledger verify`"
            )
        if head is None:
            agrees = seq == 1  # a crash between the first row and the first head file
        else:
            agrees = (head.seq, head.entry_hash) == (seq, entry_hash) or (
                head.seq == seq - 1 and head.entry_hash == prev_hash  # crash before the head moved
            )
        if not agrees:
            if head is None:
                recorded = "there is no head file"
            elif head.seq == seq:
                recorded = f"the head file records a different entry_hash for seq {seq}"
            else:
                recorded = f"the head file records seq {head.seq}"
            raise LedgerError(
                f"{where}: ends at seq {seq} but {recorded} (truncated or rewritten?); "
                "refusing to append; run `orchestrator ledger verify`"
            )
        return seq + 1, entry_hash

    def verify(self) -> VerifyResult:
        """Check every line, the chain and the head file in one pass."""
        with self._locked(exclusive=False, create=False):
            return scan(self.path, self.head_path, self._key).result

    def repair(self) -> RepairResult:
        """Move a torn last line (and only that) aside, truncate to the last good line and
        bring the head file up to date; refuse anything else (``verify.repair``)."""
        with self._locked(exclusive=True, create=True):
            return repair(self.path, self.head_path, self._key)
