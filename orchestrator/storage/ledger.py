"""The decision ledger: ``.state/ledger.jsonl``, append-only and hash-chained.

Every decision the orchestrator makes (and, later, its outcome) is one row, one line. Rows
are never updated: an outcome is a new row whose ``supersedes`` is the decision row's
``entry_hash``. Inputs are recorded as a hash (``inputs_hash``), never as the payload.

Row and line
    A row has exactly the fields in ``FIELDS``. Its line in the file is exactly
    ``canonical(row) + b"\\n"``, where ``canonical`` is ``json.dumps`` with sorted keys,
    no whitespace, ``ensure_ascii=False``, UTF-8, and no NaN/Infinity (floats are written
    with ``repr``, so they round-trip). Reading a line and re-serialising it gives the
    same bytes.

Hash construction
    ``entry_hash = SHA-256(prev_hash + canonical(row without entry_hash))`` where
    ``prev_hash`` is the previous row's ``entry_hash`` as 64 ASCII hex characters (64 zeros
    for the first row). With a key (the CLI reads ``$ORCHESTRATOR_LEDGER_KEY``) it is
    ``HMAC-SHA256(key, same bytes)``, so a consistent rewrite of the whole file by someone
    without the key is caught.

    Why it can be checked without re-serialising: keys are sorted, ``entry_hash`` is never
    the first key, so ``canonical(row)`` is ``canonical(row without entry_hash)`` with the
    member ``,"entry_hash":"<hex>"`` spliced in. The verifier takes the stored line, finds
    that member (its value is known from the parsed row; ``rfind``, because the members
    sorting after it hold only strings, integers and nulls, and a ``"`` inside a JSON string
    is always escaped, so no later bytes can look like it) and hashes the line minus that
    member minus the newline: exactly the bytes hashed at append time, with no
    ``json.dumps``. A forged line that makes ``rfind`` land on some other copy of the member
    would need a hash equal to a value inside its own input. Hashing stored bytes (not a
    re-serialisation) also means any byte change, even whitespace, is caught.

Head file (``ledger.head``)
    ``{"entry_hash": ..., "seq": N}`` (plus ``"hmac"`` over those two when keyed), replaced
    atomically after each append. It is what catches a truncated file: the chain alone
    cannot tell a file cut after row 6 from a ledger that only ever had 6 rows. Rows reach
    the disk (fsync) before the head moves, so after a crash the file may be one row ahead
    of the head, never behind; ``verify`` accepts exactly that.

Writers and readers
    ``append`` holds an exclusive ``flock`` on ``ledger.lock`` across: read the head and
    the last line (seeking from the end; the file is never read whole), check they agree,
    compute seq/prev_hash/entry_hash, write the line with O_APPEND, fsync, replace the
    head. ``verify`` and ``repair`` take the lock too (shared / exclusive) so they see no
    half-finished append. ``rows`` and ``recent`` take no lock: the file only grows, so
    they read a prefix, and they skip an unterminated last line.

Failure modes, as ``verify`` reports them (the first bad line, 1-based)
    * edited line: its ``entry_hash`` does not match its bytes;
    * deleted / inserted / reordered lines: ``seq`` is not the line number, or
      ``prev_hash`` is not the previous line's ``entry_hash`` (an edited row whose hash was
      recomputed without a key shows up here, on the next line);
    * truncation: the head file records more rows than the file holds, or a different
      ``entry_hash`` for its row;
    * torn last line (no newline, or not JSON, and *not* recorded by the head file): a
      crash in the middle of a write. ``append`` refuses to extend it; ``repair`` moves it
      to ``ledger.quarantine-<ts>.jsonl`` and truncates to the last good line. Anything
      else is damage or tampering, which ``repair`` refuses to paper over;
    * keyed: a head file whose HMAC does not match (rewritten without the key).

What it cannot detect
    Without a key, anyone who can write the files can rewrite the whole chain and the head
    consistently. Even with a key, the head file is a local anchor: restoring an older
    head file together with the file cut at that row (a rollback), or deleting both the
    head file and all but the first row, goes unnoticed. Copy the head's ``entry_hash``
    somewhere else (a commit, a ticket) to anchor it beyond this machine.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, StrictStr, field_validator, model_validator

from orchestrator.domain import keys
from orchestrator.domain.errors import EXIT_STATE, OrchestratorError
from orchestrator.domain.validation import Frozen
from orchestrator.storage.atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.ledger_index import (
    ActionHistory,
    LedgerIndex,
    RecordedOutcome,
    UnreadableRow,
    decision_key,
    history_by_scan,
    recent_outcomes_by_scan,
)
from orchestrator.storage.lines import line_start as _line_start
from orchestrator.storage.lines import pread as _pread
from orchestrator.storage.lines import reverse_lines as _reverse_lines
from orchestrator.storage.locks import flock

LEDGER_KEY_ENV = keys.LEDGER_KEY_ENV
ZERO_HASH = "0" * 64
# In the order canonical() writes them (sorted).
FIELDS = (
    "capability",
    "confidence",
    "decision",
    "decision_id",
    "entry_hash",
    "inputs_hash",
    "kind",
    "model_version",
    "outcome",
    "prev_hash",
    "prompt_version",
    "routing",
    "run",
    "seq",
    "source",
    "supersedes",
    "ticket",
    "ts",
)
_FIELD_SET = frozenset(FIELDS)
_HASH_MEMBER = b',"entry_hash":"'
_HEX64 = re.compile(r"[0-9a-f]{64}")
_T = TypeVar("_T")
_HEAD_MAC_DOMAIN = b"orchestrator-ledger-head\n"  # a head MAC can never pass as an entry hash
_ROW_POINTS = {
    "decision": CrashPoint.LEDGER_DECISION,
    "outcome": CrashPoint.LEDGER_OUTCOME,
    "trace": CrashPoint.LEDGER_TRACE,
}


class LedgerError(OrchestratorError):
    """The ledger cannot be appended to, read or repaired as asked."""

    exit_code = EXIT_STATE


@dataclass(frozen=True)
class VerifyResult:
    """``count``: rows that verified (all of them when ``ok``, else those before ``line``).
    ``line``: the first bad line, 1-based; ``None`` for a problem with the head file as a
    whole (missing, unreadable, wrong HMAC)."""

    ok: bool
    count: int
    line: int | None
    reason: str | None


@dataclass(frozen=True)
class RepairResult:
    """``quarantine``: where the torn bytes went (``None``: nothing was torn). ``line``: the
    torn line's number; ``size``: its bytes; ``kept``: rows left in the ledger;
    ``head_fixed``: the head file was rewritten (it was one row behind, or missing)."""

    quarantine: Path | None
    line: int | None
    size: int
    kept: int
    head_fixed: bool


# --------------------------------------------------------------------------- encoding


def _check_json(value: object) -> None:
    """Refuse what json.dumps would accept but not give back: non-string keys (1 and "1"
    would both become "1"), NaN and infinities, and objects json cannot encode."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not JSON: {value!r} (JSON has no NaN or Infinity)")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"not JSON: object key {k!r} is not a string")
            _check_json(v)
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_json(v)
        return
    raise ValueError(f"not JSON: {type(value).__name__} {value!r:.80}")


def canonical(obj: object) -> bytes:
    """The one serialisation hashed and stored: sorted keys, no whitespace, UTF-8.

    Raises ValueError for NaN/Infinity, non-string keys, text with lone surrogates (not
    encodable as UTF-8) and anything that is not JSON."""
    _check_json(obj)
    text = json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def inputs_hash(payload: object) -> str:
    """SHA-256 of the canonical bytes: records *which* inputs, without keeping them."""
    return hashlib.sha256(canonical(payload)).hexdigest()


def key_from_env(environ: Mapping[str, str], name: str = LEDGER_KEY_ENV) -> bytes | None:
    """The HMAC key from ``environ[name]``; ``None`` when unset. A set-but-empty variable is
    refused: silently falling back to an unkeyed chain would be a downgrade."""
    value = environ.get(name)
    if value is None:
        return None
    if not value:
        raise LedgerError(f"ledger error: ${name} is set but empty (unset it, or give a key)")
    return value.encode("utf-8")


def ledger_path(state_dir: Path) -> Path:
    return StateLayout(state_dir).ledger_path


def _digest(key: bytes | None, prev_hash: str, body: bytes) -> str:
    data = prev_hash.encode("ascii") + body
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.digest(key, data, "sha256").hex()


def _line_body(line: bytes, entry_hash: str) -> bytes | None:
    """The stored line minus its ``entry_hash`` member and newline: the bytes that were
    hashed. ``None`` if the member is not there (see the module docstring for why rfind)."""
    member = _HASH_MEMBER + entry_hash.encode("ascii") + b'"'
    i = line.rfind(member)
    if i < 0:
        return None
    return line[:i] + line[i + len(member) : -1]


def _head_mac(key: bytes, seq: int, entry_hash: str) -> str:
    data = _HEAD_MAC_DOMAIN + canonical({"entry_hash": entry_hash, "seq": seq})
    return hmac.digest(key, data, "sha256").hex()


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_ts(ts: str) -> None:
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        raise ValueError(f"ts: not an ISO-8601 timestamp: {ts!r}") from None
    offset = parsed.utcoffset()
    if offset is None or offset.total_seconds() != 0:
        raise ValueError(f"ts: not in UTC: {ts!r}")


def _is_hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def _encode_row(
    fields: Mapping[str, Any], seq: int, prev_hash: str, key: bytes | None
) -> tuple[dict[str, Any], bytes]:
    """Row and line for ``fields`` (every field but seq/prev_hash/entry_hash) at ``seq``."""
    row = dict(fields)
    row["seq"] = seq
    row["prev_hash"] = prev_hash
    body = canonical(row)
    entry_hash = _digest(key, prev_hash, body)
    row["entry_hash"] = entry_hash
    line = canonical(row) + b"\n"
    # The verifier recovers `body` by slicing the line; prove it can before writing.
    if _line_body(line, entry_hash) != body:
        raise AssertionError("ledger: the entry_hash member cannot be sliced back out")
    stored: dict[str, Any] = json.loads(line)
    return stored, line


# --------------------------------------------------------------------------- the row


Hex64 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
# What an outcome row copies from the decision row it supersedes.
_CARRIED = (
    "decision_id",
    "ticket",
    "run",
    "capability",
    "inputs_hash",
    "model_version",
    "prompt_version",
    "source",
    "decision",
    "confidence",
    "routing",
)


class LedgerRow(Frozen):
    """One row as a writer gives it: every field but what the ledger adds when it appends
    (``seq``, ``prev_hash``, ``entry_hash``; and ``ts`` when it is None). Validated when
    made, so a malformed row never reaches the ledger's lock."""

    kind: Literal["decision", "outcome", "trace"]
    decision_id: Annotated[StrictStr, Field(min_length=1)]
    ticket: StrictStr
    run: StrictStr
    capability: StrictStr
    inputs_hash: Hex64  # a sha256 of the inputs: which inputs, never the payload
    # None where there is nothing to name: a playbook or synthetic verdict has no model.
    model_version: StrictStr | None
    prompt_version: StrictStr | None
    source: StrictStr
    decision: dict[StrictStr, Any]
    confidence: float | None = None
    routing: StrictStr | None = None
    outcome: StrictStr | None = None
    supersedes: Hex64 | None = None  # the entry_hash of the decision row an outcome is of
    ts: StrictStr | None = None  # ISO-8601 in UTC; None: when it is appended

    @model_validator(mode="before")
    @classmethod
    def _no_other_fields(cls, data: Any) -> Any:
        # A field the row does not have (``seq``, say: the ledger's to number) is a bug in
        # the calling code, like an unknown keyword argument, not a bad value: TypeError.
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in cls.model_fields)
            if unknown:
                raise TypeError(f"LedgerRow: no such field: {', '.join(unknown)}")
        return data

    @field_validator("confidence", mode="before")
    @classmethod
    def _a_finite_number(cls, value: object) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number or None, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            raise ValueError(f"{value} is out of range") from None
        if not math.isfinite(number):
            raise ValueError(f"not JSON: {number!r} (JSON has no NaN or Infinity)")
        return number

    @field_validator("ts")
    @classmethod
    def _in_utc(cls, ts: str | None) -> str | None:
        if ts is not None:
            _check_ts(ts)
        return ts

    @model_validator(mode="after")
    def _storable(self) -> LedgerRow:
        if self.kind == "outcome" and (self.outcome is None or self.supersedes is None):
            raise ValueError("an outcome row needs `outcome` and `supersedes` (its decision row)")
        canonical(self.content(""))  # what JSON would not give back fails here
        return self

    @classmethod
    def outcome_of(
        cls, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> LedgerRow:
        """What happened to a decision, as a new row superseding its row (read from the
        ledger, with its ``entry_hash``): the decision row itself is never touched."""
        carried = {name: decision_row[name] for name in _CARRIED}
        return cls(
            kind="outcome",
            **carried,
            outcome=outcome,
            supersedes=decision_row["entry_hash"],
            ts=ts,
        )

    def content(self, ts: str) -> dict[str, Any]:
        """The fields hashed and stored (all but seq, prev_hash, entry_hash), at ``ts``."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields["decision"] = dict(self.decision)
        fields["ts"] = ts
        return fields


# --------------------------------------------------------------------------- file access


@dataclass(frozen=True)
class _Head:
    seq: int
    entry_hash: str
    mac: str | None


@dataclass(frozen=True)
class _Scan:
    result: VerifyResult
    torn: bool  # result's failure is a torn last line, and only that
    good_end: int  # byte offset just after the last good line
    size: int
    count: int
    last_hash: str
    head: _Head | None


class Ledger:
    """One ledger file, its head file (``.head``) and its lock file (``.lock``)."""

    def __init__(self, path: Path, *, key: bytes | None = None) -> None:
        if key is not None and not key:
            raise ValueError("ledger key must not be empty")
        self.path = path
        self.head_path = path.with_suffix(".head")
        self.lock_path = path.with_suffix(".lock")
        self.index = LedgerIndex(path.with_name(f"{path.stem}.index.sqlite3"), path)
        self._key = key

    # ------------------------------------------------------------------ locking, head

    @contextmanager
    def _locked(self, *, exclusive: bool, create: bool) -> Iterator[int | None]:
        """Yields the lock's descriptor, or None when a reader (``create=False``) could not
        create the lock file: a reader on a read-only copy (or of a ledger that does not
        exist yet) can still verify it; only writers need the lock file to exist."""
        with flock(self.lock_path, exclusive=exclusive, missing_ok=not create) as fd:
            yield fd

    def _read_head(self) -> _Head | None:
        try:
            raw = json.loads(self.head_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LedgerError(
                f"ledger error: {self.head_path}: unreadable head file: {exc}"
            ) from None
        if (
            not isinstance(raw, dict)
            or not {"seq", "entry_hash"} <= raw.keys() <= {"seq", "entry_hash", "hmac"}
            or type(raw["seq"]) is not int
            or raw["seq"] < 1
            or not _is_hex64(raw["entry_hash"])
            or not (raw.get("hmac") is None or _is_hex64(raw["hmac"]))
        ):
            raise LedgerError(f"ledger error: {self.head_path}: unreadable head file: bad fields")
        return _Head(raw["seq"], raw["entry_hash"], raw.get("hmac"))

    def _head_mac_problem(self, head: _Head) -> str | None:
        """Why the head file's keying does not match ours, or None."""
        if self._key is None:
            if head.mac is not None:
                return (
                    f"the ledger is keyed (its head file carries an HMAC): set ${LEDGER_KEY_ENV} "
                    "to use it"
                )
            return None
        if head.mac is None:
            return "the head file has no HMAC but a key was given: rewritten without the key?"
        if not hmac.compare_digest(head.mac, _head_mac(self._key, head.seq, head.entry_hash)):
            return "the head file's HMAC does not match: rewritten without the key (or another key)"
        return None

    def _write_head(self, seq: int, entry_hash: str) -> None:
        head: dict[str, Any] = {"entry_hash": entry_hash, "seq": seq}
        if self._key is not None:
            head["hmac"] = _head_mac(self._key, seq, entry_hash)
        atomic_write(self.head_path, canonical(head) + b"\n")

    # ------------------------------------------------------------------ append

    def append(self, row: LedgerRow) -> dict[str, Any]:
        """Append one row and return it as stored (with seq, prev_hash, entry_hash; ``ts``
        is now when the row has none).

        Raises LedgerError when the ledger's end is torn, or disagrees with its head file
        (run ``verify``); a malformed row was refused when it was made. If the head file
        cannot be replaced after the row is durable, the error propagates but the row
        stays: it is committed, and the next append brings the head file up to it."""
        fields = row.content(_utc_now() if row.ts is None else row.ts)

        with self._locked(exclusive=True, create=True):
            head = self._read_head()
            if head is not None and (problem := self._head_mac_problem(head)):
                raise LedgerError(f"ledger error: {self.path}: {problem}")
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                size = os.fstat(fd).st_size
                seq, prev_hash = self._tail_for_append(fd, size, head)
                stored, line = _encode_row(fields, seq, prev_hash, self._key)
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

    def _tail_for_append(self, fd: int, size: int, head: _Head | None) -> tuple[int, str]:
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
        if _pread(fd, 1, size - 1) != b"\n":
            torn = size - _line_start(fd, size)
            raise LedgerError(
                f"{where}: the last line is torn ({torn} bytes without a newline: an "
                "interrupted write); refusing to append; run `orchestrator ledger repair`"
            )
        start = _line_start(fd, size - 1)
        line = _pread(fd, size - start, start)
        try:
            last = json.loads(line)
        except ValueError:
            raise LedgerError(
                f"{where}: the last line is torn (not valid JSON: an interrupted write); "
                "refusing to append; run `orchestrator ledger repair`"
            ) from None
        try:
            seq, entry_hash, prev_hash = last["seq"], last["entry_hash"], last["prev_hash"]
            body = _line_body(line, entry_hash)
            ok = body is not None and _digest(self._key, prev_hash, body) == entry_hash
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

    # ------------------------------------------------------------------ verify, repair

    def verify(self) -> VerifyResult:
        """Check every line, the chain and the head file in one pass."""
        with self._locked(exclusive=False, create=False):
            return self._scan().result

    def _scan(self) -> _Scan:
        key = self._key
        count, prev, prev_prev, good_end, size = 0, ZERO_HASH, ZERO_HASH, 0, 0
        head: _Head | None = None

        def fail(line: int | None, reason: str, *, torn: bool = False) -> _Scan:
            return _Scan(
                VerifyResult(False, count, line, reason), torn, good_end, size, count, prev, head
            )

        try:
            head = self._read_head()
        except LedgerError as exc:
            return fail(None, str(exc).removeprefix("ledger error: "))
        if head is not None and head.mac is not None and key is None:
            return fail(None, str(self._head_mac_problem(head)))

        damaged: str | None = None  # why the last line is unusable, if it is
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            fh = None
        if fh is not None:
            with fh:
                size = os.fstat(fh.fileno()).st_size
                offset = 0
                # The hot loop: per line one json.loads, one rfind, one hash, a few compares.
                for line in fh:
                    offset += len(line)
                    lineno = count + 1
                    if line[-1:] != b"\n":
                        damaged = "no trailing newline"
                        break
                    try:
                        row = json.loads(line)
                    except ValueError:
                        if offset >= size:
                            damaged = "not valid JSON"
                            break
                        return fail(lineno, "not valid JSON")
                    if type(row) is not dict or row.keys() != _FIELD_SET:
                        return fail(lineno, "not a ledger row (wrong or missing fields)")
                    entry_hash, prev_hash, seq = row["entry_hash"], row["prev_hash"], row["seq"]
                    try:
                        body = _line_body(line, entry_hash)
                        good = body is not None and _digest(key, prev_hash, body) == entry_hash
                    except (AttributeError, UnicodeEncodeError):  # a hash that is not a string
                        good = False
                    if not good:
                        return fail(
                            lineno,
                            "entry_hash mismatch: the line was edited"
                            + (" (or written with another key)" if key else ""),
                        )
                    if type(seq) is not int or seq != lineno:
                        return fail(
                            lineno,
                            f"seq is {seq!r}, expected {lineno}: "
                            "a line was deleted, inserted or moved",
                        )
                    if prev_hash != prev:
                        return fail(
                            lineno,
                            "prev_hash does not match the entry_hash of "
                            + (f"line {lineno - 1}" if lineno > 1 else "nothing (64 zeros)")
                            + ": a line was deleted, inserted, moved or rewritten",
                        )
                    prev_prev, prev, count, good_end = prev, entry_hash, lineno, offset

        # The head file vouches for everything up to its seq; only rows after it (at most
        # the one an interrupted append left) may be unvouched for.
        if head is not None:
            if problem := self._head_mac_problem(head):
                return fail(None, problem)
            if head.seq > count:
                if damaged is not None:
                    return fail(
                        count + 1,
                        f"line {count + 1} is damaged ({damaged}) but the head file records "
                        f"{head.seq} entries, so it was committed: not an interrupted write",
                    )
                return fail(
                    count + 1,
                    f"truncated: the head file records {head.seq} entries but the ledger "
                    f"ends after {count}",
                )
            vouched = prev if head.seq == count else prev_prev
            if head.seq < count - 1:
                return fail(
                    head.seq + 1,
                    f"the ledger has {count} entries but the head file records {head.seq}: "
                    "rows were added without updating the head file",
                )
            if head.entry_hash != vouched:
                return fail(
                    head.seq,
                    f"the head file's entry_hash for seq {head.seq} differs from line "
                    f"{head.seq}'s: the ledger was rewritten (or truncated and re-appended)",
                )
        elif count > 1:
            return fail(None, f"the head file {self.head_path} is missing ({count} entries)")
        if damaged is not None:
            return fail(
                count + 1,
                f"torn last line ({damaged}): an interrupted write; "
                "run `orchestrator ledger repair`",
                torn=True,
            )
        return _Scan(
            VerifyResult(True, count, None, None), False, good_end, size, count, prev, head
        )

    def repair(self) -> RepairResult:
        """Move a torn last line (and only that) aside, truncate to the last good line and
        bring the head file up to date. Anything else is refused: a bad line in the middle
        is damage or tampering, not a crash, and must not be silently cut away."""
        with self._locked(exclusive=True, create=True):
            scan = self._scan()
            if not scan.result.ok and not scan.torn:
                where = f"line {scan.result.line}: " if scan.result.line is not None else ""
                raise LedgerError(
                    f"ledger error: {self.path}: refusing to repair: {where}{scan.result.reason}. "
                    "Only a torn last line (an interrupted write) is repaired; this is damage "
                    "or tampering: keep the file as evidence and restore from a backup"
                )
            quarantine: Path | None = None
            torn_size = 0
            if scan.torn:
                quarantine = self._quarantine(scan.good_end, scan.size)
                torn_size = scan.size - scan.good_end
                fd = os.open(self.path, os.O_RDWR)
                try:
                    os.ftruncate(fd, scan.good_end)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            head_fixed = scan.count > 0 and (scan.head is None or scan.head.seq != scan.count)
            if head_fixed:
                self._write_head(scan.count, scan.last_hash)
            after = self._scan().result
            if not after.ok:  # cannot happen: we only cut a line nothing vouched for
                raise LedgerError(f"ledger error: {self.path}: still broken after repair: {after}")
        return RepairResult(
            quarantine, scan.result.line if scan.torn else None, torn_size, scan.count, head_fixed
        )

    def _quarantine(self, start: int, end: int) -> Path:
        """Copy bytes [start, end) to a new side file, durably, before anything is cut."""
        with self.path.open("rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        for n in range(1000):
            suffix = f"-{n}" if n else ""
            target = self.path.with_name(f"{self.path.stem}.quarantine-{stamp}{suffix}.jsonl")
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            return target
        raise LedgerError(f"ledger error: {self.path}: no free quarantine file name")

    # ------------------------------------------------------------------ reading

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
                    row = json.loads(_pread(fh.fileno(), length, offset))
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
            end = _line_start(fd, size)  # drop an unterminated last line
            found: list[dict[str, Any]] = []
            for number, line in enumerate(_reverse_lines(fd, end)):
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
