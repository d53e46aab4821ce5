"""Repository integrity around a recipe: what git reads as instructions — ``.git/config``,
``.git/hooks/``, ``.git/info/``, ``.git/commondir``, ``.git/config.worktree`` and wherever
the config points ``core.hooksPath`` — is snapshotted (bytes, modes, symbolic links)
before a recipe runs. Any change the recipe made is a red result and is put back byte for
byte; ``git reset`` restores none of it.

A symbolic link in the working tree that leads outside the clone (or into ``.git``) is
a way for a later write — a check's, a stage's — to land where nothing may be written."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["absent", "file", "dir", "symlink"]


@dataclass(frozen=True)
class Entry:
    kind: Kind
    mode: int = 0
    data: bytes = b""  # a file's bytes, or a symbolic link's target


Snapshot = Mapping[str, Entry]  # absolute path → what was there


def guarded_paths(clone: Path, hooks_path: str | None) -> list[Path]:
    """The paths a recipe must leave alone: git's own instructions for this clone."""
    clone = clone.resolve()
    dot_git = clone / ".git"
    # ``commondir`` and ``config.worktree``: git reads config (and refs) through them too.
    paths = [dot_git / "config", dot_git / "hooks", dot_git / "info"]
    paths += [dot_git / "commondir", dot_git / "config.worktree"]
    if hooks_path:
        configured = Path(os.path.expanduser(hooks_path))
        # A relative hooks path is relative to where hooks run: the top of the work tree.
        hooks = Path(os.path.abspath(clone / configured))
        # Only a directory of the clone's own: outside it a recipe writes nothing, and the
        # clone itself or all of .git would mean copying everything (``core.hooksPath=/``
        # must not make us read the whole disk).
        if hooks.is_relative_to(clone) and hooks not in (clone, dot_git):
            paths.append(hooks)
    return paths


def _entry(path: Path) -> Entry:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return Entry("absent")
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Entry("symlink", 0, os.fsencode(os.readlink(path)))
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", mode)
    if stat.S_ISREG(info.st_mode):
        return Entry("file", mode, path.read_bytes())
    return Entry("file", mode, b"<special file>")


def snapshot(roots: Iterable[Path]) -> dict[str, Entry]:
    """Every path under ``roots`` (symbolic links recorded, never followed)."""
    found: dict[str, Entry] = {}
    for root in roots:
        found[str(root)] = entry = _entry(root)
        if entry.kind != "dir":
            continue
        for directory, dirs, files in os.walk(root):
            for name in sorted(dirs + files):
                path = Path(directory, name)
                found[str(path)] = _entry(path)
    return found


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """The paths whose content, mode or kind differ (added and removed included)."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def restore(before: Snapshot, after: Snapshot) -> None:
    """Put every changed path back as ``before`` recorded it: what was added goes
    (deepest first), what differs is rewritten (parents first, so no write passes
    through a link the recipe planted)."""
    changed = changes(before, after)
    for path_text in sorted(changed, key=len, reverse=True):
        if before.get(path_text, Entry("absent")).kind == "absent":
            _remove(Path(path_text))
    for path_text in sorted(changed, key=lambda p: (p.count(os.sep), p)):
        wanted = before.get(path_text, Entry("absent"))
        path = Path(path_text)
        if wanted.kind == "absent":
            continue
        current = _entry(path)
        if current.kind != "absent" and (current.kind != wanted.kind or wanted.kind != "dir"):
            _remove(path)
        if wanted.kind == "dir":
            path.mkdir(exist_ok=True)
            path.chmod(wanted.mode)
        elif wanted.kind == "symlink":
            os.symlink(os.fsdecode(wanted.data), path)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            descriptor = os.open(path, flags, wanted.mode)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(wanted.data)
            path.chmod(wanted.mode)


def escaping_symlinks(clone: Path) -> list[str]:
    """Symbolic links in the work tree that lead outside the clone or into its ``.git``
    (paths relative to the clone)."""
    root = clone.resolve()
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (directory == str(root) and d == ".git")]
        for name in dirs + files:
            path = Path(directory, name)
            if not path.is_symlink():
                continue
            target = Path(os.path.realpath(path))
            if not target.is_relative_to(root) or target.is_relative_to(root / ".git"):
                found.append(str(path.relative_to(root)))
    return sorted(found)
