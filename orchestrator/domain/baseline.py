"""A baseline of green runs: the templates (``line_templates.py``) that one check's
passing logs in one repository printed, kept as 8-byte keys. A line of a failing log whose
template no green run printed is worth a reader's look; one every green run prints is
ordinary output (Zuul's logreduce/logjuicer, issue 25).

Learned from each check that passes (``storage/baselines.py`` keeps them on disk), and
rebuilt on demand (``orchestrator baseline CHECK``). Bounded: at most ``max_keys`` keys,
each with the number of green runs that printed it (saturating at 255). When a merge
goes over, the keys printed by the most runs stay; among keys printed by as many runs,
those of the newer run stay (a tool's output changes with its versions: what the last
green run printed is what the next one will), then the smaller key (so the choice is
deterministic). Whatever is dropped only makes a line look new again, never hides one.

The format (``to_bytes``), little-endian::

    magic "ORCHBASE"  version u16 (1)  reserved u16 (0)  runs u32  keys u32
    check length u16  repo length u16  check (UTF-8)  repo (UTF-8)
    8-byte keys, ascending, no two alike       a u8 run count (1..255) per key
    BLAKE2b-128 of everything before it

Pure: reads the log it is given, writes nothing, knows no state-dir path.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from orchestrator.domain.line_templates import template_key, template_of
from orchestrator.domain.log_line import PREFIX, without_columns
from orchestrator.domain.terminal import plain_bytes

__all__ = [
    "MAX_KEYS",
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "Baseline",
    "BaselineDamaged",
    "learn",
    "log_lines",
    "merge",
]

MAX_LOG_BYTES: Final = 64 << 20
MAX_KEYS: Final = 200_000
# What a file may hold whatever ``max_keys`` it was learned with (36 MiB): beyond it a
# file is not one we wrote.
MAX_FILE_KEYS: Final = 1 << 22
# A check's or a repository's name longer than this is refused (a URL or a path is less).
MAX_NAME_BYTES: Final = 4096
# A log is read in chunks this big. A line longer than ``MAX_RAW_LINE_BYTES`` as written
# (a meter's redraws, a minified bundle) is read from its start only; a line as a reader
# sees it is templated from its first ``MAX_LINE_BYTES``: its template is cut at 240
# bytes anyway (only tokens that mask down to a fraction of their length could reach
# past the cut), and masking costs the square of a long token's length.
CHUNK_BYTES: Final = 256 << 10
MAX_RAW_LINE_BYTES: Final = 64 << 10
MAX_LINE_BYTES: Final = 1024
# A run count saturates here: one byte per key.
MAX_RUN_COUNT: Final = 255

_MAGIC: Final = b"ORCHBASE"
_VERSION: Final = 1
_HEADER: Final = struct.Struct("<8sHHIIHH")
_KEY_BYTES: Final = 8
_CHECKSUM_BYTES: Final = 16
# A CI runner's prefix at each line start (``log_line.without_prefix``, over a chunk).
_PREFIXES: Final = re.compile(b"(?m)^" + PREFIX)


class BaselineDamaged(ValueError):
    """The bytes are not a baseline this code wrote: the message says what is wrong."""


def _checksum(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=_CHECKSUM_BYTES).digest()


def _name_bytes(what: str, name: str) -> bytes:
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_NAME_BYTES:
        raise ValueError(f"baseline: {what} is longer than {MAX_NAME_BYTES} bytes")
    return encoded


class Baseline:
    """The template keys of the green logs of one check in one repository, each with how
    many of those runs printed it. Immutable."""

    __slots__ = ("_counts", "check", "repo", "runs")

    check: str
    repo: str
    runs: int
    _counts: Mapping[bytes, int]

    def __init__(self, check: str, repo: str, runs: int, counts: Mapping[bytes, int]) -> None:
        _name_bytes("check", check)
        _name_bytes("repo", repo)
        if not 0 <= runs < 1 << 32:
            raise ValueError(f"baseline: runs out of range: {runs}")
        object.__setattr__(self, "check", check)
        object.__setattr__(self, "repo", repo)
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "_counts", MappingProxyType(dict(counts)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Baseline is immutable (tried to set {name})")

    def __len__(self) -> int:
        return len(self._counts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Baseline):
            return NotImplemented
        return (self.check, self.repo, self.runs, dict(self._counts)) == (
            other.check,
            other.repo,
            other.runs,
            dict(other._counts),
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Baseline(check={self.check!r}, repo={self.repo!r}, runs={self.runs}, keys={len(self)})"

    def knows(self, template: bytes) -> bool:
        """Whether a green run printed a line of this template (``line_templates.template_of``)."""
        return template_key(template) in self._counts

    def runs_with(self, template: bytes) -> int:
        """How many of the green runs printed a line of this template (0 to 255: a count
        saturates), for a reader that weighs "every green run" above "one of them"."""
        return self._counts.get(template_key(template), 0)

    def to_bytes(self) -> bytes:
        """The versioned binary form, with its checksum (see the module's docstring)."""
        check, repo = _name_bytes("check", self.check), _name_bytes("repo", self.repo)
        keys = sorted(self._counts)
        body = b"".join(
            (
                _HEADER.pack(_MAGIC, _VERSION, 0, self.runs, len(keys), len(check), len(repo)),
                check,
                repo,
                b"".join(keys),
                bytes(self._counts[k] for k in keys),
            )
        )
        return body + _checksum(body)

    @classmethod
    def from_bytes(cls, data: bytes) -> Baseline:
        """The baseline ``to_bytes`` wrote; BaselineDamaged on anything else (another
        magic or version, a wrong checksum or length, a cut file, keys out of order)."""
        view = memoryview(data)
        if len(view) < _HEADER.size + _CHECKSUM_BYTES:
            raise BaselineDamaged(f"truncated: {len(view)} bytes, less than a header")
        magic, version, reserved, runs, count, check_len, repo_len = _HEADER.unpack_from(view)
        if magic != _MAGIC:
            raise BaselineDamaged("not a baseline (wrong magic)")
        if version != _VERSION or reserved != 0:
            raise BaselineDamaged(f"unknown format version {version}.{reserved}")
        if count > MAX_FILE_KEYS:
            raise BaselineDamaged(f"too many keys: {count}")
        names_end = _HEADER.size + check_len + repo_len
        keys_end = names_end + count * _KEY_BYTES
        expected = keys_end + count + _CHECKSUM_BYTES
        if len(view) != expected:
            what = "truncated" if len(view) < expected else "trailing bytes"
            raise BaselineDamaged(f"{what}: {len(view)} bytes, the header says {expected}")
        if _checksum(view[:-_CHECKSUM_BYTES]) != view[-_CHECKSUM_BYTES:]:
            raise BaselineDamaged("checksum mismatch")
        try:
            check = bytes(view[_HEADER.size : _HEADER.size + check_len]).decode("utf-8")
            repo = bytes(view[_HEADER.size + check_len : names_end]).decode("utf-8")
        except UnicodeDecodeError:
            raise BaselineDamaged("a name is not UTF-8") from None
        blob = bytes(view[names_end:keys_end])
        keys = [blob[i : i + _KEY_BYTES] for i in range(0, len(blob), _KEY_BYTES)]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise BaselineDamaged("keys out of order")
        counts = bytes(view[keys_end : keys_end + count])
        if 0 in counts:
            raise BaselineDamaged("a key with no run")
        try:
            return cls(check, repo, runs, dict(zip(keys, counts, strict=True)))
        except ValueError as exc:
            raise BaselineDamaged(str(exc)) from None


def merge(older: Baseline | None, newer: Baseline, *, max_keys: int = MAX_KEYS) -> Baseline:
    """``older``'s runs and ``newer``'s in one baseline of at most ``max_keys`` keys (see
    the module's docstring for which stay). The two must be of one check and repo."""
    if max_keys < 1:
        raise ValueError("baseline: max_keys must be at least 1")
    if older is None:
        return newer if len(newer) <= max_keys else _bounded(newer, {}, max_keys)
    if (older.check, older.repo) != (newer.check, newer.repo):
        raise ValueError(
            f"baseline: cannot merge {newer.check!r} of {newer.repo!r} "
            f"into {older.check!r} of {older.repo!r}"
        )
    counts = dict(older._counts)
    for key, runs in newer._counts.items():
        counts[key] = min(MAX_RUN_COUNT, counts.get(key, 0) + runs)
    merged = Baseline(newer.check, newer.repo, min(older.runs + newer.runs, (1 << 32) - 1), counts)
    return merged if len(merged) <= max_keys else _bounded(merged, newer._counts, max_keys)


def _bounded(baseline: Baseline, newer: Mapping[bytes, int], max_keys: int) -> Baseline:
    counts = baseline._counts
    kept = sorted(counts, key=lambda k: (-counts[k], k not in newer, k))[:max_keys]
    return Baseline(baseline.check, baseline.repo, baseline.runs, {k: counts[k] for k in kept})


def learn(
    baseline: Baseline | None,
    log: Path,
    *,
    check: str,
    repo: str,
    max_log_bytes: int = MAX_LOG_BYTES,
    max_keys: int = MAX_KEYS,
    max_seconds: float | None = None,
    _clock: Callable[[], float] = time.monotonic,
    _chunk_bytes: int = CHUNK_BYTES,
) -> Baseline:
    """``baseline`` (None: an empty one) with one more green run: the templates of the
    lines of ``log`` as a reader sees them (``log_lines``), from its last
    ``max_log_bytes``. Reads the log in chunks: memory stays at a chunk and the keys.
    One run's own keys are capped at ``max_keys`` too (the first seen kept). With
    ``max_seconds``, what is read by then is what the run teaches (a baseline is a cache:
    a slow read must not hold a ticket up). Raises OSError when the log cannot be read."""
    deadline = None if max_seconds is None else _clock() + max_seconds
    seen: dict[bytes, int] = {}
    for lines in log_lines(log, max_log_bytes=max_log_bytes, _chunk_bytes=_chunk_bytes):
        for line in set(lines):  # a line repeated in a chunk is templated once
            seen[template_key(template_of(line))] = 1
            if len(seen) >= max_keys or (deadline is not None and _clock() > deadline):
                return merge(baseline, Baseline(check, repo, 1, seen), max_keys=max_keys)
    return merge(baseline, Baseline(check, repo, 1, seen), max_keys=max_keys)


def log_lines(
    log: Path, *, max_log_bytes: int = MAX_LOG_BYTES, _chunk_bytes: int = CHUNK_BYTES
) -> Iterator[list[bytes]]:
    """The lines of the last ``max_log_bytes`` of ``log`` (its first, cut line left
    out), a chunk's worth at a time, each as a reader sees it: no escape sequences, a
    redrawn line's last frame (``terminal.plain_bytes``), without gh's job and step
    columns and a CI runner's timestamp prefix (``log_line``), cut at ``MAX_LINE_BYTES``:
    what ``line_templates.template_of`` is given, here and by whoever compares a failing
    log's lines with a baseline. Raises OSError for a file that cannot be read, and for
    one that is not a regular file."""
    for chunk in _chunks(log, max_log_bytes, _chunk_bytes):
        text = without_columns(plain_bytes(chunk))
        if b":" in text or b"#" in text:  # every prefix has a clock or a BuildKit step
            text = _PREFIXES.sub(b"", text)
        lines = text.split(b"\n")
        if len(text) > MAX_LINE_BYTES:
            lines = [line[:MAX_LINE_BYTES] for line in lines]
        yield lines


def _chunks(log: Path, max_log_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Whole lines (a chunk's worth, without the last newline) of the last
    ``max_log_bytes`` of ``log``; a line longer than ``MAX_RAW_LINE_BYTES`` as its start."""
    with open(log, "rb", buffering=0) as raw:
        info = os.fstat(raw.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(f"not a regular file: {log}")
        f = io.BufferedReader(raw, buffer_size=chunk_bytes)
        start = max(0, info.st_size - max_log_bytes)
        remaining = info.st_size - start
        f.seek(max(0, start - 1))
        # A window that starts inside a line skips that line's cut start.
        skipping = start > 0 and f.read(1) != b"\n"
        carry = b""
        while remaining > 0:
            block = f.read(min(chunk_bytes, remaining))
            if not block:
                break  # the file shrank under us: what was there is what we learn
            remaining -= len(block)
            if skipping:
                newline = block.find(b"\n")
                if newline < 0:
                    continue
                block, skipping = block[newline + 1 :], False
            data = carry + block if carry else block
            last = data.rfind(b"\n")
            if last >= 0:
                yield data[:last]
                carry = data[last + 1 :]
            else:
                carry = data
            if len(carry) > MAX_RAW_LINE_BYTES:
                yield carry[:MAX_RAW_LINE_BYTES]
                carry, skipping = b"", True
        if carry:
            yield carry
