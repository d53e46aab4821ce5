"""The playbook's files (issue 44): one TOML file per entry under the project's
``playbook/`` directory (beside its config.toml: a team reviews and shares them with the
project), and the built-in entries shipped with orchestrator, which a project file of the
same id takes the place of (so a built-in entry is retired by writing it retired).

Every write replaces the whole file atomically under the directory's lock: two runs that
learn the same failure at once agree into one entry rather than one overwriting the other.
A file that is not an entry is reported by name with its bad key (``ConfigError``), never
silently used.

Reading a thousand entries for one decision
    Parsing a TOML file and validating its entry costs about half a millisecond, and
    even stat()ing a thousand files costs a few: a decision must not pay either for
    every entry of a large playbook (issue 44: matching against 1,000 promoted entries
    within 5 ms, ``bench/bench_playbook.py``). So the directory keeps an index,
    ``.index.json`` (a cache: safe to delete, no need to commit it): the directory's
    inode and mtime as it last saw them, and per file its inode, mtime and size and what
    a look-up needs of its entry (its signature's key and its status).
    ``index()`` answers from it while the directory has not changed, and otherwise
    re-reads what changed. The index is only ever a hint of which file to read: the
    entry that decides is read from its file and validated when it is looked up
    (``LazyEntries``), and its key and status checked again, so an index that is stale
    or lies can hide an entry but never make one decide. Parsed entries are also kept
    in this process while their file is unchanged.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final, NamedTuple

from orchestrator.domain.errors import ConfigError
from orchestrator.domain.playbook import (
    ENTRY_ID,
    SUFFIX,
    EntryStatus,
    PlaybookEntry,
    parse_entry,
    render_entry,
)
from orchestrator.starter import builtin_playbook_texts
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage._locks import flock

PLAYBOOK_DIR: Final = "playbook"
LOCK_NAME: Final = ".playbook.lock"
INDEX_NAME: Final = ".index.json"
GITIGNORE: Final = ".gitignore"
_IGNORED: Final = (
    "# orchestrator's lock and index of this directory: the machine's, not the team's\n"
    f"{LOCK_NAME}\n{INDEX_NAME}\n"
)
INDEX_VERSION: Final = 3
BUILTIN: Final = "built-in"

# (inode, mtime in ns, size): a file with all three unchanged holds what it held.
_Stat = tuple[int, int, int]
# Entries parsed in this process, by file. Bounded; cleared whole when full.
_PARSED: dict[str, tuple[_Stat, PlaybookEntry]] = {}
_MAX_CACHED: Final = 20_000
# The last index read, by its file: (its stat, the index).
_INDEXES: dict[str, tuple[_Stat, Index]] = {}
_SETTLED_NS: Final = 2_000_000_000
# A row of the index's ``files``: inode, mtime, size, signature key, status.
_Row = list[Any]


class Index(NamedTuple):
    """The playbook's index as a look-up uses it (see the module docstring)."""

    seen: tuple[int, int] | None  # the directory's (inode, mtime) it was made from
    files: Mapping[str, _Row]  # every file that holds an entry, by name, in name order
    # A promoted entry's signature key → the first file (in name order) with it.
    decide: Mapping[str, str]
    patterns: tuple[str, ...]  # the promoted pattern entries' files

    def with_key(self, key: str) -> str | None:
        """The first file (in name order) whose entry's signature key is ``key``, in any
        status (what ``propose`` looks for; a scan: proposing is rare)."""
        return next((name for name, row in self.files.items() if row[3] == key), None)


def row_of(entry: PlaybookEntry, stat: _Stat) -> _Row:
    return [*stat, entry.match.signature_key(), entry.status.value]


def index_of(seen: tuple[int, int] | None, files: Mapping[str, _Row]) -> Index:
    decide: dict[str, str] = {}
    patterns: list[str] = []
    promoted = EntryStatus.PROMOTED.value
    for name, (_ino, _mtime, _size, key, status) in files.items():
        if status != promoted:
            continue
        if key is None:
            patterns.append(name)
        else:
            decide.setdefault(key, name)
    return Index(seen, dict(files), decide, tuple(patterns))


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


def _stat_of(st: os.stat_result) -> _Stat:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


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

    def _project_files(self) -> list[tuple[str, _Stat]]:
        """The entry files' names, in name order, each with what says whether it changed."""
        try:
            listed = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise ConfigError(f"{self.dir}: cannot be listed: {exc}") from None
        found: dict[str, _Stat] = {}
        for item in listed:
            name = item.name
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            try:
                if not item.is_file():
                    continue
                st = item.stat()
            except OSError:
                continue  # removed since it was listed
            found[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return [(name, found[name]) for name in sorted(found)]

    def entries(
        self, *, on_error: Callable[[ConfigError], None] | None = None
    ) -> tuple[PlaybookEntry, ...]:
        """Every entry, the project's files first (in name order), then the built-in ones
        no project file replaces. A file that is not an entry raises ConfigError, or, given
        ``on_error``, is reported to it and left out (a run goes on without it)."""
        found: list[PlaybookEntry] = []
        for name, stat in self._project_files():
            try:
                entry = self._read(name, stat)
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

    def _read(self, name: str, stat: _Stat | None = None) -> PlaybookEntry:
        """The entry in file ``name``; parsed once per process while the file is unchanged
        (the same inode, mtime and size: every write replaces the file, so a new inode)."""
        path = self.dir / name
        where = str(path)
        if stat is not None and (cached := _PARSED.get(where)) is not None and cached[0] == stat:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from None
        entry = parse_entry(text, where)
        if f"{entry.id}{SUFFIX}" != name:
            raise ConfigError(f"{path}: id: {entry.id!r} is not the file's name")
        if stat is not None:
            if len(_PARSED) >= _MAX_CACHED:
                _PARSED.clear()
            _PARSED[where] = (stat, entry)
        return entry

    def read_current(self, name: str) -> PlaybookEntry | None:
        """The entry in file ``name`` as it is now (None: the file is gone). Raises
        ConfigError for a file that is not an entry."""
        if not name.endswith(SUFFIX) or not ENTRY_ID.match(name.removesuffix(SUFFIX)):
            raise ConfigError(f"{self.dir}: {name!r} is not an entry's file name")
        try:
            stat = _stat_of(os.stat(self.dir / name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"{self.dir / name}: cannot be read: {exc}") from None
        return self._read(name, stat)

    def get(self, entry_id: str) -> PlaybookEntry | None:
        """The entry with this id (the project's file, else the built-in one), or None."""
        path = self.path(entry_id)
        if path.is_file():
            return self._read(path.name)
        return next((e for e in builtin_entries() if e.id == entry_id), None)

    def write(self, entry: PlaybookEntry) -> Path:
        """Write ``entry`` as its file (replacing it whole). Hold ``locked()`` around a
        read-change-write."""
        path = self.path(entry.id)
        atomic_write(path, render_entry(entry).encode("utf-8"), mode=0o644, mirrored=False)
        return path

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The directory's lock: one writer changes the playbook at a time. The first
        writer also leaves a ``.gitignore`` there naming the lock and the index: the
        entries are the team's to commit, those two files the machine's."""
        with flock(self.dir / LOCK_NAME):
            ignore = self.dir / GITIGNORE
            if not ignore.exists():
                atomic_write(ignore, _IGNORED.encode("utf-8"), mode=0o644, mirrored=False)
            yield

    # ------------------------------------------------------------------ the index

    def index(self, *, on_error: Callable[[ConfigError], None], rescan: bool = False) -> Index:
        """The index of the project's files (see the module docstring).

        While the directory is as the index last saw it (its inode and mtime: a file
        added, removed or replaced, as every write here and git's checkouts do, moves
        them), the stored index is the answer, with no entry file opened or stat()ed.
        Else, or with ``rescan``, every file is stat()ed, one whose stat is not its row's
        is parsed and its row made again, and the index rewritten. A file edited in place
        moves neither: it is read again when the directory next changes, or by a
        ``rescan`` (``orchestrator playbook list`` does one); until then the index can
        only hide its change, never act on it (``LazyEntries`` reads what decides from
        the file). A file that is not an entry is reported to ``on_error`` and left out
        (parsed, and reported, again at the next rescan)."""
        try:
            st = os.stat(self.dir)
        except (FileNotFoundError, NotADirectoryError):
            return index_of(None, {})
        except OSError as exc:
            raise ConfigError(f"{self.dir}: cannot be read: {exc}") from None
        directory = (st.st_ino, st.st_mtime_ns)
        stored = self._read_index()
        if stored.seen == directory and not rescan:
            return stored
        files: dict[str, _Row] = {}
        for name, stat in self._project_files():
            row = stored.files.get(name)
            if row is None or tuple(row[:3]) != stat:
                try:
                    row = row_of(self._read(name, stat), stat)
                except ConfigError as exc:
                    on_error(exc)
                    continue
            files[name] = row
        # A directory changed in the last two seconds may change again within the same
        # mtime tick (a coarse clock): not trusted yet, so the next look rescans.
        trusted = directory if time.time_ns() - st.st_mtime_ns > _SETTLED_NS else None
        made = index_of(trusted, files)
        if files != stored.files or trusted != stored.seen:
            made = self._write_index(made)
        return made

    def _read_index(self) -> Index:
        """The stored index; an empty one when there is none or it cannot be read (every
        file is then parsed, and the index written again)."""
        path = self.dir / INDEX_NAME
        try:
            stat = _stat_of(os.stat(path))
        except OSError:
            return index_of(None, {})
        cached = _INDEXES.get(str(path))
        if cached is not None and cached[0] == stat:
            return cached[1]
        try:
            raw = json.loads(path.read_bytes())
            if raw["version"] != INDEX_VERSION:
                raise ValueError("another version")
            seen = None if raw["dir"] is None else (int(raw["dir"][0]), int(raw["dir"][1]))
            files = raw["files"]
            if not isinstance(files, dict):
                raise TypeError("not a table")
            # A row of another shape fails here; a file's name is checked when it is read
            # (``read_current``), and what the file holds when it decides.
            index = index_of(seen, files)
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            return index_of(None, {})  # torn by two writers at once, or not ours: rebuilt
        _INDEXES[str(path)] = (stat, index)
        return index

    def _write_index(self, index: Index) -> Index:
        """Written in place, not renamed into the directory, which would move the
        directory's mtime that the index records. Two writers at once can tear it: it
        then does not parse, and is rebuilt. Best effort: a directory that cannot be
        written (a read-only checkout) is rescanned at each look instead."""
        path = self.dir / INDEX_NAME
        if not path.exists():
            index = index._replace(seen=None)  # making the file moves the directory
        data = {
            "version": INDEX_VERSION,
            "dir": None if index.seen is None else list(index.seen),
            "files": index.files,
        }
        body = json.dumps(data).encode()
        with suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            # Kept as written: a rewrite of the same size within one mtime tick would
            # otherwise read as the one before it.
            _INDEXES[str(path)] = (_stat_of(os.stat(path)), index)
        return index


class LazyEntries(Mapping[str, PlaybookEntry]):
    """The promoted signature entries by key, read from their files when looked up: the
    file named by the index is read and validated, and its entry counts only if it is
    still promoted and its key is still the one asked for. ``eager``: entries already
    read (the built-in ones), used when no project file has the key."""

    def __init__(
        self,
        store: PlaybookStore,
        names: Mapping[str, str],
        eager: Mapping[str, PlaybookEntry],
        note: Callable[[ConfigError], None],
    ) -> None:
        self._store = store
        self._names = dict(names)
        self._eager = {k: v for k, v in eager.items() if k not in self._names}
        self._note = note

    def __getitem__(self, key: str) -> PlaybookEntry:
        name = self._names.get(key)
        if name is None:
            return self._eager[key]
        try:
            entry = self._store.read_current(name)
        except ConfigError as exc:
            self._note(exc)
            raise KeyError(key) from None
        if (
            entry is None
            or entry.status is not EntryStatus.PROMOTED
            or entry.match.signature_key() != key
        ):
            raise KeyError(key)
        return entry

    def __iter__(self) -> Iterator[str]:
        yield from self._names
        yield from self._eager

    def __len__(self) -> int:
        return len(self._names) + len(self._eager)
