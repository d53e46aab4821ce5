"""Which storage a state dir has in this process: the files backend, or the PostgreSQL
backend once something opened it (``open_storage``). Code that is handed only a state
dir's path asks ``open_state(path)`` instead of building ``FileStorage(path)`` itself, so
that what it writes and reads goes where the process's config said.

The registry is per process (the PostgreSQL storage publishes every write under its state
dir, from any thread) and holds nothing until a PostgreSQL URL is configured: the files
backend never imports the driver or the PostgreSQL stores.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from orchestrator.storage.files import FileStorage

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig
    from orchestrator.storage.postgres.storage import PostgresStorage

# What a state dir's storage is in this process (for annotations).
StateStorage: TypeAlias = "FileStorage | PostgresStorage"

_OPEN: dict[Path, PostgresStorage] = {}
_GUARD = threading.Lock()


def open_storage(root: Path, url: str | None, *, lease_s: float) -> StateStorage:
    """``root``'s storage: with ``url`` (``postgresql://…``), the process's one
    PostgreSQL storage of it, opened (migrated, publishing) on first call; else files."""
    if url is None:
        return open_state(root)
    return open_database(root, url, lease_s=lease_s)


def open_configured(loaded: LoadedConfig, root: Path, environ: Mapping[str, str]) -> StateStorage:
    """``root``'s storage as the config (or ``$ORCHESTRATOR_STORAGE_URL``) says: its
    files, or their working copy of a PostgreSQL database's record."""
    from orchestrator.domain.storage_url import storage_url_from  # pydantic: only here

    url = storage_url_from(loaded.config.storage.url, environ)
    return open_storage(
        root, None if url is None else url.reveal(), lease_s=loaded.config.distributed.lease_s
    )


def open_database(root: Path, url: str, *, lease_s: float) -> PostgresStorage:
    """The process's one PostgreSQL storage of ``root`` on ``url``, opened (migrated,
    publishing) on first call."""
    key = root.resolve()
    with _GUARD:
        found = _OPEN.get(key)
        if found is None:
            from orchestrator.storage.postgres.storage import PostgresStorage

            found = _OPEN[key] = PostgresStorage(root, url, lease_s=lease_s).attach()
        return found


def open_state(root: Path) -> StateStorage:
    """``root``'s storage as this process opened it (files unless ``open_storage`` was
    given a database URL for it)."""
    if _OPEN:
        with _GUARD:
            found = _OPEN.get(root.resolve())
        if found is not None:
            return found
    return FileStorage(root)


def close_storages() -> None:
    """Close every PostgreSQL storage this process opened (a test's teardown)."""
    with _GUARD:
        found = list(_OPEN.values())
        _OPEN.clear()
    for storage in found:
        storage.close()
