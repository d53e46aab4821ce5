"""Reading the ledger: its rows in order, its last rows, one decision's rows, and the
history of a failure signature's outcomes (the last three through the index).

Readers of the file take no lock: the file only grows, so they read a prefix, and they
skip an unterminated last line (an append in progress, or a torn write ``verify``
reports). Look-ups through the index hold the ledger's exclusive lock, so the index can be
caught up and no append runs meanwhile; where no index can be kept (a read-only copy of a
state dir) they answer from a scan of every row instead.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.storage._locks import flock
from orchestrator.storage.ledger.encoding import LedgerError
from orchestrator.storage.ledger.index import (
    ActionHistory,
    LedgerIndex,
    RecordedOutcome,
    UnreadableRow,
    decision_key,
    history_by_scan,
    recent_outcomes_by_scan,
)
from orchestrator.storage.ledger.lines import line_start, pread, reverse_lines

_T = TypeVar("_T")


class LedgerReader:
    """What can be read of one ledger file, with its index beside it and its lock file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_suffix(".lock")
        self.index = LedgerIndex(path.with_name(f"{path.stem}.index.sqlite3"), path)

    @contextmanager
    def _locked(self, *, exclusive: bool, create: bool) -> Iterator[int | None]:
        """Yields the lock's descriptor, or None when a reader (``create=False``) could not
        create the lock file: a reader on a read-only copy (or of a ledger that does not
        exist yet) can still verify it; only writers need the lock file to exist."""
        with flock(self.lock_path, exclusive=exclusive, missing_ok=not create) as fd:
            yield fd

    def history(self, signature: str) -> dict[str, ActionHistory]:
        """Per action: how many outcomes were recorded for decisions about this failure
        signature, and how many of them were green. Answered from the index (brought up to
        date first), so it costs the same with a million rows as with none; from a scan
        of every row when no index can be kept (a read-only copy of a state dir)."""
        if not self.path.exists():
            return {}
        looked_up = self._from_index(lambda: self.index.history(signature))
        if looked_up is not None:
            return looked_up
        return history_by_scan(self.rows(), signature)

    def recent_outcomes(self, signature: str, last: int) -> dict[str, list[RecordedOutcome]]:
        """Per action: the ``last`` latest outcomes of decisions about this failure
        signature, newest first, each with its time. From the index, like ``history``;
        from a scan when no index can be kept."""
        if not self.path.exists():
            return {}
        looked_up = self._from_index(lambda: self.index.recent_outcomes(signature, last))
        if looked_up is not None:
            return looked_up
        return recent_outcomes_by_scan(self.rows(), signature, last)

    def rows_of(self, decision_id: str) -> list[dict[str, Any]]:
        """Every row of one decision, oldest first: read by offset from the index, or by
        a scan when no index can be kept."""
        if not self.path.exists():
            return []
        places = self._from_index(lambda: self.index.places(decision_id))
        if places is not None:
            found = self._read_placed(places, decision_id)
            if found is not None:
                return found
            # The bytes moved under the index (an edit in the middle, which verify
            # reports): drop it, so the next look-up rebuilds it, and answer from the rows.
            self._from_index(self.index.discard)
        return [r for r in self.rows() if r.get("decision_id") == decision_id]

    def _read_placed(
        self, places: list[tuple[int, int]], decision_id: str
    ) -> list[dict[str, Any]] | None:
        """The rows at ``places`` that are ``decision_id``'s; None if any place does not
        hold a row of a decision with its key (the index no longer matches the file)."""
        key = decision_key(decision_id)
        found: list[dict[str, Any]] = []
        with self.path.open("rb") as fh:
            for offset, length in places:
                try:
                    row = json.loads(pread(fh.fileno(), length, offset))
                    placed_id = row["decision_id"]
                    if decision_key(placed_id) != key:
                        return None
                except (ValueError, TypeError, KeyError, AttributeError):
                    return None
                if placed_id == decision_id:  # not another id with the same 64-bit key
                    found.append(row)
        return found

    def _from_index(self, look_up: Callable[[], _T]) -> _T | None:
        """``look_up()`` under the ledger's exclusive lock (so the index can be caught up and
        no append runs meanwhile); None when the index cannot be used here."""
        try:
            with self._locked(exclusive=True, create=False) as fd:
                if fd is None:
                    return None
                try:
                    return look_up()
                except UnreadableRow as exc:
                    raise LedgerError(
                        f"ledger error: {self.path}: {exc}; run `orchestrator ledger verify`"
                    ) from None
                except sqlite3.OperationalError:
                    return None  # read-only, out of space: the index is not at fault
                except sqlite3.DatabaseError:
                    # A damaged index answers nothing; the next look-up builds a new one.
                    self.index.discard()
                    return None
        except (sqlite3.Error, OSError):
            return None

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row, first to last, as stored. An unterminated (or unparsable) last line is
        skipped: it is an append in progress or a torn write (``verify`` reports it)."""
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return
        with fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            for number, line in enumerate(fh, start=1):
                offset += len(line)
                if offset > size or not line.endswith(b"\n"):
                    return
                try:
                    row = json.loads(line)
                except ValueError:
                    if offset >= size:
                        return
                    raise LedgerError(
                        f"ledger error: {self.path}: line {number} is not valid JSON; "
                        "run `orchestrator ledger verify`"
                    ) from None
                yield row

    def recent(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` rows, oldest first, reading from the end of the file."""
        if n <= 0:
            return []
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            size = os.fstat(fd).st_size
            end = line_start(fd, size)  # drop an unterminated last line
            found: list[dict[str, Any]] = []
            for number, line in enumerate(reverse_lines(fd, end)):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    if number == 0:  # the last line: torn, skipped as rows() does
                        continue
                    raise LedgerError(
                        f"ledger error: {self.path}: an unreadable line among the last "
                        f"{n}; run `orchestrator ledger verify`"
                    ) from None
                if len(found) == n:
                    break
        finally:
            os.close(fd)
        found.reverse()
        return found
