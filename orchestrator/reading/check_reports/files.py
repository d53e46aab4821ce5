"""Finding a check's report files under its clone and opening them safely."""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator.reading.check_reports.limits import GLOB_MAX_ENTRIES, PATTERN_MAX_CHARS


def _pattern_problem(pattern: object) -> str | None:
    if not isinstance(pattern, str) or not pattern.strip():
        return "it is empty"
    if len(pattern) > PATTERN_MAX_CHARS:
        return f"it is over {PATTERN_MAX_CHARS} characters"
    if "\x00" in pattern:
        return "it holds a NUL character"
    if pattern.startswith("/") or ".." in pattern.split("/"):
        return "it must be relative to the clone, without '..'"
    if ".git" in pattern.split("/"):
        return "it names .git, which is never read"
    return None


@dataclass
class _Glob:
    """Pattern matching under the clone, pathlib-style (``*`` within one name, ``**`` any
    number of directories), that never descends through a symlink or into ``.git`` and
    stops after ``GLOB_MAX_ENTRIES`` directory entries."""

    root: Path
    budget: int = GLOB_MAX_ENTRIES

    def names(self, directory: Path) -> list[tuple[str, bool]]:
        """(name, is a real directory) of each entry, within the budget."""
        out: list[tuple[str, bool]] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if self.budget <= 0:
                        break
                    self.budget -= 1
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    out.append((entry.name, is_dir))
        except OSError:
            return []
        return sorted(out)

    def matches(self, pattern: str) -> list[str]:
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if parts and parts[-1] == "**":  # every file below, rather than pathlib's directories
            parts.append("*")
        found: list[str] = []
        self._walk((), parts, found)
        return list(dict.fromkeys(found))

    def _walk(self, at: tuple[str, ...], parts: list[str], found: list[str]) -> None:
        if not parts:
            return
        here = self.root.joinpath(*at)
        head, rest = parts[0], parts[1:]
        if head == "**":
            self._walk(at, rest, found)
            for name, is_dir in self.names(here):
                if is_dir and name != ".git":
                    self._walk((*at, name), parts, found)
            return
        if not any(c in head for c in "*?["):
            path = here / head
            if not rest:
                if os.path.lexists(path):
                    found.append("/".join((*at, head)))
            elif os.path.islink(path) and not _inside(self.root, path):
                # Named outright, so said: the one "match", refused with a note.
                found.append("/".join((*at, head)))
            elif os.path.isdir(path):
                self._walk((*at, head), rest, found)
            return
        for name, is_dir in self.names(here):
            if name == ".git" or not fnmatch.fnmatchcase(name, head):
                continue
            if not rest:
                found.append("/".join((*at, name)))
            elif is_dir:
                self._walk((*at, name), rest, found)


def _inside(root: Path, path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def _open_report(clone_real: Path, rel: str) -> tuple[int, os.stat_result] | str:
    """An open descriptor of the report and its status, or why it is not read."""
    if ".git" in rel.split("/"):
        return "skipped, .git is never read"
    real = Path(os.path.realpath(clone_real / rel))
    if clone_real not in real.parents:
        return "skipped, its real path is outside the clone"
    if ".git" in real.relative_to(clone_real).parts:
        return "skipped, .git is never read"
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        return f"skipped, cannot open it ({exc.strerror or exc})"
    try:
        status = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return f"skipped, cannot read its status ({exc.strerror or exc})"
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        return f"skipped, not a regular file (a {_file_kind(status.st_mode)})"
    return fd, status


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
    ):  # fmt: skip
        if test(mode):
            return name
    return "special file"
