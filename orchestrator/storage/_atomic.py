"""Atomic file replacement: a reader sees the old file or the new one, never half of one,
and a crash (even SIGKILL, even power loss after fsync) leaves one of the two.

A crash between writing the temp file and renaming it leaves the temp file behind:
``.<name>.<host>-<pid>.<random>.tmp`` beside its target (``<host>``: 8 hex digits of the
machine's name). The writer is in the name so ``sweep_stale_temps`` can tell one a live
process is writing at this moment (kept) from one whose writer is gone (removed). A pid
means nothing on another machine sharing the state dir: another host's temp files, and
those written before the writer was in the name (``.<name>.<random>.tmp``), are removed
only once they are older than any write takes.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Final

from orchestrator.storage.crash_points import CrashPoint, crash_point

# No write holds its temp file for anything like this: one older is an orphan even if
# its pid now names a live process (pids are reused, and a container restarts at the
# same ones).
STALE_AFTER_S: Final = 3600.0
# mkstemp's random part is 8 characters of [a-z0-9_].
_TEMP: Final = re.compile(
    r"^\.(?P<name>.+?)(?:\.(?P<host>[0-9a-f]{8})-(?P<pid>\d+))?\.[a-z0-9_]{8}\.tmp$"
)


@cache
def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def writer_tag() -> str:
    """What a temp file written by this process carries: its host and pid."""
    return f"{_host()}-{os.getpid()}"


# A check run right before each rename inside ``checked_before_replace``: what may write
# must still be so when the file lands, not only when the write began (the fsync before
# the rename is the slow part, and a process can be paused anywhere in it).
_BEFORE_REPLACE: ContextVar[Callable[[], None] | None] = ContextVar("before_replace", default=None)


@contextmanager
def checked_before_replace(check: Callable[[], None]) -> Iterator[None]:
    """Run ``check`` right before each file written in the block replaces its target; if
    it raises, the file is not replaced (its temp file is removed) and the error goes on."""
    token = _BEFORE_REPLACE.set(check)
    try:
        yield
    finally:
        _BEFORE_REPLACE.reset(token)


# Where the state dir's writes are also published before they land (the PostgreSQL
# backend: ``postgres/mirror.py``), by state dir. Per process, not per context: a batch's
# worker threads and the plain functions that write under the state dir (batch records,
# the notify outbox) must all be published, and threads do not inherit a ContextVar.
_PUBLISHERS: dict[Path, tuple[Callable[[Path, bytes], bool], Callable[[Path], None]]] = {}
_PUBLISHERS_LOCK = threading.Lock()


def _forget_nothing(path: Path) -> None:
    return None


@contextmanager
def published_under(
    root: Path,
    publish: Callable[[Path, bytes], bool],
    forget: Callable[[Path], None] = _forget_nothing,
) -> Iterator[None]:
    """Inside the block, each file written under ``root`` is handed to
    ``publish(path, data)`` (``path`` resolved) before it replaces its target; if
    ``publish`` raises, the file is not replaced. It answers whether it kept the file
    (True: the local copy is then not fsynced, see ``atomic_write``). Each file
    ``remove_file`` removes there is handed to ``forget(path)`` first. One publisher per
    root at a time."""
    key = root.resolve()
    with _PUBLISHERS_LOCK:
        if key in _PUBLISHERS:
            raise RuntimeError(f"{key}: its writes are already published elsewhere")
        _PUBLISHERS[key] = (publish, forget)
    try:
        yield
    finally:
        with _PUBLISHERS_LOCK:
            _PUBLISHERS.pop(key, None)


def _publisher(
    path: Path,
) -> tuple[Path, tuple[Callable[[Path, bytes], bool], Callable[[Path], None]]] | None:
    """(``path`` resolved, its root's publisher), or None where nothing publishes."""
    if not _PUBLISHERS:  # the files backend: no lookup at all
        return None
    resolved = path.resolve()
    with _PUBLISHERS_LOCK:
        found = list(_PUBLISHERS.items())
    for root, publisher in found:
        if resolved.is_relative_to(root):
            return resolved, publisher
    return None


def remove_file(path: Path) -> None:
    """Remove a state-dir file (gone already is fine), and where its writes are
    published, from there first: a removed file must not come back with the next copy."""
    found = _publisher(path)
    if found is not None:
        found[1][1](found[0])
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def atomic_write(
    path: Path, data: bytes | Iterable[bytes], *, mode: int | None = None, mirrored: bool = True
) -> None:
    """Write ``data`` (bytes, or its parts in order: a big file written as it is made,
    never held whole) to a temp file in ``path``'s directory, fsync it, rename it over
    ``path``, then fsync the directory so the rename itself is durable. The file is the
    owner's alone (0600) unless ``mode`` says otherwise, set before it is renamed. Inside
    ``checked_before_replace``, its check runs just before the rename; under a root
    ``published_under`` names, the file is published first (unless ``mirrored`` is
    False: a copy being brought down from where it is published).

    A file its publisher kept (it answered True) is not fsynced here: its record is
    where it was published, committed before the rename, and this copy is only the
    machine's working copy. Only a reboot loses what was not flushed, and after one the
    copy is compared with the record again (``postgres/mirror.py``, "Hydrating")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    found = _publisher(path) if mirrored else None
    if found is not None and not isinstance(data, bytes):
        data = b"".join(data)  # what is published is the whole file
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{writer_tag()}.", suffix=".tmp"
    )
    published = False
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            if isinstance(data, bytes):
                fh.write(data)
            else:
                fh.writelines(data)
            fh.flush()
            if found is None:
                os.fsync(fh.fileno())
            crash_point(CrashPoint.TEMP_FILE)
            check = _BEFORE_REPLACE.get()
            if check is not None:
                check()
            if found is not None:
                assert isinstance(data, bytes)  # joined above
                # Handed the resolved path: it is resolved once.
                published = found[1][0](found[0], data)
                if not published:
                    os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if published:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        # Sweeps run before this process writes anything: a temp file of our pid is a
        # dead process's (a restarted container reuses pids).
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def is_stale_temp(name: str, age_s: float, *, target_suffix: str = "") -> bool:
    """Whether ``name`` (a directory entry ``age_s`` seconds old) is a temp file an
    atomic write left behind, of a target ending ``target_suffix``, and nobody is
    writing it any more."""
    match = _TEMP.match(name)
    if match is None or not match.group("name").endswith(target_suffix):
        return False
    if age_s >= STALE_AFTER_S:
        return True
    pid, host = match.group("pid"), match.group("host")
    return pid is not None and host == _host() and not _alive(int(pid))


def sweep_stale_temps(
    directories: Iterable[Path], *, target_suffix: str = "", now: float | None = None
) -> list[Path]:
    """Remove the stale temp files directly in each of ``directories`` (not below them:
    a clone may hold files of its own that look alike), only those of targets ending
    ``target_suffix`` (in a person's directory, only ours). Returns what was removed."""
    now = time.time() if now is None else now
    removed = []
    for directory in directories:
        try:
            with os.scandir(directory) as listing:
                entries = [e for e in listing if e.name.endswith(".tmp")]
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if is_stale_temp(entry.name, age, target_suffix=target_suffix):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
            except FileNotFoundError:  # its writer renamed it meanwhile, or another sweep
                continue
    return removed
