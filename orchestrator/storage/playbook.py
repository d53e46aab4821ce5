"""The playbook's files (issue 44): one TOML file per entry under the project's
``playbook/`` directory (beside its config.toml: a team reviews and shares them with the
project), and the built-in entries shipped with orchestrator, which a project file of the
same id takes the place of (so a built-in entry is retired by writing it retired).

Every write replaces the whole file atomically under the directory's lock: two runs that
learn the same failure at once agree into one entry rather than one overwriting the other.
A file that is not an entry is reported by name with its bad key (``ConfigError``), never
silently used.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from orchestrator.domain.errors import ConfigError
from orchestrator.domain.playbook import (
    ENTRY_ID,
    SUFFIX,
    PlaybookEntry,
    parse_entry,
    render_entry,
)
from orchestrator.starter import builtin_playbook_texts
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage._locks import flock

PLAYBOOK_DIR: Final = "playbook"
LOCK_NAME: Final = ".playbook.lock"
BUILTIN: Final = "built-in"

# (inode, mtime in ns, size): a file with all three unchanged holds what it held.
_Stat = tuple[int, int, int]
# Entries parsed in this process, by file: a decision in a long batch reads a directory of
# a thousand entries by stat()ing them, not by parsing a thousand TOML files (issue 44's
# benchmark, bench/bench_playbook.py). Bounded; cleared whole when full.
_PARSED: dict[Path, tuple[_Stat, PlaybookEntry]] = {}
_MAX_CACHED: Final = 20_000


@functools.cache
def builtin_entries() -> tuple[PlaybookEntry, ...]:
    """The entries shipped with orchestrator (``starter/playbook/``), parsed once."""
    return tuple(
        parse_entry(text, f"orchestrator/starter/{PLAYBOOK_DIR}/{name}")
        for name, text in builtin_playbook_texts()
    )


def is_builtin(entry: PlaybookEntry) -> bool:
    """Whether ``entry`` is a built-in one as shipped (no project file takes its place)."""
    return any(entry is shipped for shipped in builtin_entries())


class PlaybookStore:
    """The entries of one project: ``root`` is the directory holding its config.toml."""

    def __init__(self, root: Path) -> None:
        self.dir = root / PLAYBOOK_DIR

    def path(self, entry_id: str) -> Path:
        if not ENTRY_ID.match(entry_id):
            raise ConfigError(
                f"playbook: {entry_id!r} is not an entry id (lower-case letters, digits, '-')"
            )
        return self.dir / f"{entry_id}{SUFFIX}"

    def _project_files(self) -> list[tuple[Path, _Stat]]:
        """The entry files, in name order, each with what says whether it changed."""
        try:
            listed = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise ConfigError(f"{self.dir}: cannot be listed: {exc}") from None
        found: list[tuple[Path, _Stat]] = []
        for item in listed:
            if not item.name.endswith(SUFFIX):
                continue
            try:
                if not item.is_file():
                    continue
                st = item.stat()
            except OSError:
                continue  # removed since it was listed
            found.append((Path(item.path), (st.st_ino, st.st_mtime_ns, st.st_size)))
        found.sort(key=lambda f: f[0].name)
        return found

    def entries(
        self, *, on_error: Callable[[ConfigError], None] | None = None
    ) -> tuple[PlaybookEntry, ...]:
        """Every entry, the project's files first (in name order), then the built-in ones
        no project file replaces. A file that is not an entry raises ConfigError, or, given
        ``on_error``, is reported to it and left out (a run goes on without it)."""
        found: list[PlaybookEntry] = []
        for path, stat in self._project_files():
            try:
                entry = self._read(path, stat)
            except ConfigError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            found.append(entry)
        ids = {e.id for e in found}
        for entry in builtin_entries():
            if entry.id not in ids:
                found.append(entry)
        return tuple(found)

    def _read(self, path: Path, stat: _Stat | None = None) -> PlaybookEntry:
        """The entry in ``path``; parsed once per process while its file is unchanged (the
        same inode, mtime and size: every write replaces the file, so a new inode)."""
        if stat is not None and (cached := _PARSED.get(path)) is not None and cached[0] == stat:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from None
        entry = parse_entry(text, str(path))
        if f"{entry.id}{SUFFIX}" != path.name:
            raise ConfigError(f"{path}: id: {entry.id!r} is not the file's name")
        if stat is not None:
            if len(_PARSED) >= _MAX_CACHED:
                _PARSED.clear()
            _PARSED[path] = (stat, entry)
        return entry

    def get(self, entry_id: str) -> PlaybookEntry | None:
        """The entry with this id (the project's file, else the built-in one), or None."""
        path = self.path(entry_id)
        if path.is_file():
            return self._read(path)
        return next((e for e in builtin_entries() if e.id == entry_id), None)

    def write(self, entry: PlaybookEntry) -> Path:
        """Write ``entry`` as its file (replacing it whole). Hold ``locked()`` around a
        read-change-write."""
        path = self.path(entry.id)
        atomic_write(path, render_entry(entry).encode("utf-8"), mode=0o644, mirrored=False)
        return path

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The directory's lock: one writer changes the playbook at a time."""
        with flock(self.dir / LOCK_NAME):
            yield
