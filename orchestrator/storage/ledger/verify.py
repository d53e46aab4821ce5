"""Checking the whole ledger (``verify``) and mending the one damage a crash can do
(``repair``). Both run under the ledger's lock (shared / exclusive), held by ``Ledger``, so
they see no half-finished append.

The checking itself (``check_lines``) walks an iterable of stored lines and a head, not a
file: the PostgreSQL ledger hands it its rows and head row, so both stores are verified by
the same code, with the same messages (a message's "head file" is the head row there).

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

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.storage.ledger.encoding import (
    FIELD_SET,
    ZERO_HASH,
    LedgerError,
    digest,
    line_body,
)
from orchestrator.storage.ledger.head import Head, read_head, write_head


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


@dataclass(frozen=True)
class Scan:
    result: VerifyResult
    torn: bool  # result's failure is a torn last line, and only that
    good_end: int  # byte offset just after the last good line
    size: int
    count: int
    last_hash: str
    head: Head | None


def scan(path: Path, head_path: Path, key: bytes | None) -> Scan:
    """Every line, the chain and the head file, in one pass (the caller holds the lock)."""
    try:
        head = read_head(head_path)
    except LedgerError as exc:
        reason = str(exc).removeprefix("ledger error: ")
        return Scan(VerifyResult(False, 0, None, reason), False, 0, 0, 0, ZERO_HASH, None)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return check_lines((), head, key, head_name=str(head_path))
    with fh:
        size = os.fstat(fh.fileno()).st_size
        return replace(check_lines(fh, head, key, head_name=str(head_path)), size=size)


def check_lines(
    lines: Iterable[bytes], head: Head | None, key: bytes | None, *, head_name: str
) -> Scan:
    """Check ``lines`` (each as stored, with its newline), the chain and ``head`` in one
    pass: the ledger's whole verification, whichever store the lines and head come from
    (the file, or PostgreSQL). ``head_name`` names the head where a message needs to."""
    count, prev, prev_prev, good_end, size = 0, ZERO_HASH, ZERO_HASH, 0, 0

    def fail(line: int | None, reason: str, *, torn: bool = False) -> Scan:
        return Scan(
            VerifyResult(False, count, line, reason), torn, good_end, size, count, prev, head
        )

    if head is not None and head.mac is not None and key is None:
        return fail(None, str(head.mac_problem(key)))

    damaged: str | None = None  # why the last line is unusable, if it is
    offset = 0
    # One line of look-ahead tells the last line (which may be torn) from the others.
    pending = iter(lines)
    following = next(pending, None)
    # The hot loop: per line one json.loads, one rfind, one hash, a few compares.
    while following is not None:
        line, following = following, next(pending, None)
        offset += len(line)
        size = offset
        lineno = count + 1
        if line[-1:] != b"\n":
            damaged = "no trailing newline"
            break
        try:
            row = json.loads(line)
        except ValueError:
            if following is None:
                damaged = "not valid JSON"
                break
            return fail(lineno, "not valid JSON")
        if type(row) is not dict or row.keys() != FIELD_SET:
            return fail(lineno, "not a ledger row (wrong or missing fields)")
        entry_hash, prev_hash, seq = row["entry_hash"], row["prev_hash"], row["seq"]
        try:
            body = line_body(line, entry_hash)
            good = body is not None and digest(key, prev_hash, body) == entry_hash
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
                f"seq is {seq!r}, expected {lineno}: a line was deleted, inserted or moved",
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
        if problem := head.mac_problem(key):
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
        return fail(None, f"the head file {head_name} is missing ({count} entries)")
    if damaged is not None:
        return fail(
            count + 1,
            f"torn last line ({damaged}): an interrupted write; run `orchestrator ledger repair`",
            torn=True,
        )
    return Scan(VerifyResult(True, count, None, None), False, good_end, size, count, prev, head)


def repair(path: Path, head_path: Path, key: bytes | None) -> RepairResult:
    """Move a torn last line (and only that) aside, truncate to the last good line and
    bring the head file up to date. Anything else is refused: a bad line in the middle
    is damage or tampering, not a crash, and must not be silently cut away."""
    before = scan(path, head_path, key)
    if not before.result.ok and not before.torn:
        where = f"line {before.result.line}: " if before.result.line is not None else ""
        raise LedgerError(
            f"ledger error: {path}: refusing to repair: {where}{before.result.reason}. "
            "Only a torn last line (an interrupted write) is repaired; this is damage "
            "or tampering: keep the file as evidence and restore from a backup"
        )
    quarantine: Path | None = None
    torn_size = 0
    if before.torn:
        quarantine = _quarantine(path, before.good_end, before.size)
        torn_size = before.size - before.good_end
        fd = os.open(path, os.O_RDWR)
        try:
            os.ftruncate(fd, before.good_end)
            os.fsync(fd)
        finally:
            os.close(fd)
    head_fixed = before.count > 0 and (before.head is None or before.head.seq != before.count)
    if head_fixed:
        write_head(head_path, before.count, before.last_hash, key)
    after = scan(path, head_path, key).result
    if not after.ok:  # cannot happen: we only cut a line nothing vouched for
        raise LedgerError(f"ledger error: {path}: still broken after repair: {after}")
    return RepairResult(
        quarantine, before.result.line if before.torn else None, torn_size, before.count, head_fixed
    )


def _quarantine(path: Path, start: int, end: int) -> Path:
    """Copy bytes [start, end) to a new side file, durably, before anything is cut."""
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        suffix = f"-{n}" if n else ""
        target = path.with_name(f"{path.stem}.quarantine-{stamp}{suffix}.jsonl")
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
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return target
    raise LedgerError(f"ledger error: {path}: no free quarantine file name")
