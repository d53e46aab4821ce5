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

    def _project_files(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.suffix == SUFFIX and p.is_file())

    def entries(
        self, *, on_error: Callable[[ConfigError], None] | None = None
    ) -> tuple[PlaybookEntry, ...]:
        """Every entry, the project's files first (in name order), then the built-in ones
        no project file replaces. A file that is not an entry raises ConfigError, or, given
        ``on_error``, is reported to it and left out (a run goes on without it)."""
        found: list[PlaybookEntry] = []
        for path in self._project_files():
            try:
                entry = self._read(path)
            except ConfigError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            found.append(entry)
        ids = {e.id for e in found}
        for name, text in builtin_playbook_texts():
            entry = parse_entry(text, f"orchestrator/starter/{PLAYBOOK_DIR}/{name}")
            if entry.id not in ids:
                found.append(entry)
        return tuple(found)

    def _read(self, path: Path) -> PlaybookEntry:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from None
        entry = parse_entry(text, str(path))
        if f"{entry.id}{SUFFIX}" != path.name:
            raise ConfigError(f"{path}: id: {entry.id!r} is not the file's name")
        return entry

    def get(self, entry_id: str) -> PlaybookEntry | None:
        """The entry with this id (the project's file, else the built-in one), or None."""
        path = self.path(entry_id)
        if path.is_file():
            return self._read(path)
        return next((e for e in self.entries() if e.id == entry_id), None)

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
