"""Baselines of green runs on disk: ``baselines/<repo>/<check>.baseline`` (``layout.py``),
one per check and repository, in ``domain/baseline.py``'s format.

A baseline is a cache: learning from a log that cannot be read, or a file that does not
read back, never fails a ticket. A damaged file is moved aside (``*.damaged``, the last
one kept for a look) and the next green check starts a new one. Writes are atomic, and
a new run is merged into the file under its flock, so two workers whose checks pass at
once both count (the log is learned before the lock is taken: the lock is held for a
read, a merge and a write).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from orchestrator.domain.baseline import (
    MAX_KEYS,
    MAX_LOG_BYTES,
    Baseline,
    BaselineDamaged,
    learn,
    merge,
)
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage._locks import flock
from orchestrator.storage.layout import StateLayout

# A green check waits this long at most for its log to be learned: what was read by
# then is what it teaches (the next check of the run is waiting).
LEARN_SECONDS = 5.0
# No baseline file we write is bigger (MAX_FILE_KEYS keys, names, header): a bigger one
# is not read.
_MAX_FILE_BYTES = 40 << 20


def _quiet(text: str) -> None:
    pass


class StoredBaseline(NamedTuple):
    """One baseline file found on disk: what it holds (None when it does not read back,
    with why), and when it was last written."""

    path: Path
    baseline: Baseline | None
    updated: float
    problem: str | None = None


class BaselineStore:
    """The baselines of one state dir. ``warn`` is told, in a sentence, of each damaged
    file moved aside and each log that could not be learned."""

    def __init__(
        self,
        state_dir: Path,
        *,
        warn: Callable[[str], None] = _quiet,
        max_keys: int = MAX_KEYS,
        max_log_bytes: int = MAX_LOG_BYTES,
        learn_seconds: float | None = LEARN_SECONDS,
    ) -> None:
        self.layout = StateLayout(state_dir)
        self._warn = warn
        self.max_keys = max_keys
        self.max_log_bytes = max_log_bytes
        self.learn_seconds = learn_seconds

    def path(self, repo: str, check: str) -> Path:
        return self.layout.baseline_path(repo, check)

    def load(
        self, repo: str, check: str, *, warn: Callable[[str], None] | None = None
    ) -> Baseline | None:
        """The baseline of ``check`` in ``repo``, or None when there is none. A file that
        does not read back (or is another check's) is moved aside to ``*.damaged`` and
        None returned; ``warn`` (else the store's) is told."""
        try:
            return self._read(repo, check)
        except (BaselineDamaged, OSError):
            pass
        # Looked at again under the lock: a reader must not move aside what a merge has
        # just written (every write is atomic, so what is damaged stays damaged).
        with flock(self.layout.baseline_lock_path(repo, check)):
            return self._read_or_move_aside(repo, check, warn or self._warn)

    def save(self, baseline: Baseline) -> None:
        """Replace the stored baseline of its check and repository with ``baseline``
        (atomically, under the file's lock: a merge in progress finishes first)."""
        with flock(self.layout.baseline_lock_path(baseline.repo, baseline.check)):
            atomic_write(self.path(baseline.repo, baseline.check), baseline.to_bytes())

    def add(self, runs: Baseline, *, warn: Callable[[str], None] | None = None) -> Baseline:
        """Merge ``runs`` into the stored baseline of its check and repository (a new one
        when there is none, or it was damaged), under the file's lock. Returns what was
        written."""
        with flock(self.layout.baseline_lock_path(runs.repo, runs.check)):
            stored = self._read_or_move_aside(runs.repo, runs.check, warn or self._warn)
            merged = merge(stored, runs, max_keys=self.max_keys)
            atomic_write(self.path(runs.repo, runs.check), merged.to_bytes())
        return merged

    def record_green(
        self, repo: str, check: str, log: Path, *, warn: Callable[[str], None] | None = None
    ) -> None:
        """Learn from one green log of ``check`` in ``repo`` and add it to the stored
        baseline. Never raises for a log or a baseline that cannot be read or written:
        ``warn`` (else the store's) is told why and the baseline is left as it was. Takes
        ``learn_seconds`` at most to learn (then the part read counts)."""
        say = warn or self._warn
        try:
            runs = learn(
                None,
                log,
                check=check,
                repo=repo,
                max_log_bytes=self.max_log_bytes,
                max_keys=self.max_keys,
                max_seconds=self.learn_seconds,
            )
            self.add(runs, warn=say)
        except (OSError, ValueError) as exc:
            say(f"baseline of check {check!r} in {repo} not updated: {_reason(exc)}")

    def stored(self) -> list[StoredBaseline]:
        """Every baseline file, read (a damaged one is named with why, not moved)."""
        found = []
        for path in self.layout.baseline_paths():
            try:
                with open(path, "rb") as f:
                    info = os.fstat(f.fileno())
                    data = f.read(_MAX_FILE_BYTES + 1)
                found.append(StoredBaseline(path, Baseline.from_bytes(data), info.st_mtime))
            except FileNotFoundError:
                continue  # pruned meanwhile
            except (BaselineDamaged, OSError) as exc:
                found.append(StoredBaseline(path, None, 0.0, _reason(exc)))
        return found

    def prune(self, *, older_than_days: float, now: float | None = None) -> list[str]:
        """Remove the baselines (and the damaged files moved aside) not written for
        ``older_than_days``; returns their paths relative to the state dir. Each goes
        under its lock, and only if still that old then (a merge may just have landed).
        The lock files stay: one removed while a process waits on it would let a second
        process take a new lock beside the first."""
        cutoff = (time.time() if now is None else now) - older_than_days * 86400
        removed = []
        paths = self.layout.baseline_paths() + self.layout.baseline_paths(damaged=True)
        for path in sorted(paths):
            with flock(self.layout.lock_path_of_baseline(path)):
                try:
                    if path.stat().st_mtime >= cutoff:
                        continue
                    path.unlink()
                except FileNotFoundError:
                    continue
            removed.append(path.relative_to(self.layout.root).as_posix())
        return removed

    def _read(self, repo: str, check: str) -> Baseline | None:
        try:
            with open(self.path(repo, check), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > _MAX_FILE_BYTES:
                    raise BaselineDamaged(f"{size} bytes, more than any baseline")
                data = f.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        baseline = Baseline.from_bytes(data)
        if (baseline.repo, baseline.check) != (repo, check):
            raise BaselineDamaged(f"it holds check {baseline.check!r} of {baseline.repo}")
        return baseline

    def _read_or_move_aside(
        self, repo: str, check: str, warn: Callable[[str], None]
    ) -> Baseline | None:
        """Under the baseline's lock: what it holds, or None (moved aside if damaged)."""
        try:
            return self._read(repo, check)
        except (BaselineDamaged, OSError) as exc:
            why = _reason(exc)
        path = self.path(repo, check)
        aside = self.layout.damaged_baseline_path(repo, check)
        try:
            path.replace(aside)
            where = f"moved aside to {aside.name}"
        except OSError:
            try:
                path.unlink()
                where = "removed"
            except OSError as exc:
                where = f"left in place ({_reason(exc)})"
        warn(
            f"baseline of check {check!r} in {repo} was damaged ({why}): {where}; "
            "the next green run starts a new one"
        )
        return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)
