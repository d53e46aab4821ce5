"""Files the orchestrator publishes for others to read, wherever a person points them
(``report --out``, ``batch --report``, ``batch --metrics``, and ``batch --log``'s
rotation): usually outside the state
dir, read by a web server or node_exporter's textfile collector while a batch rewrites
them. Written atomically, so a reader sees the last page or the new one, never half of
one; the temp file ends ``.tmp``, which the textfile collector (``*.prom``) never reads.
Unlike the state dir's files (the owner's alone), a published file gets the mode any new
file would (0666 less the umask): it is written to be read by a web server or a collector.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from orchestrator.domain.errors import UsageError
from orchestrator.storage._atomic import atomic_write


def publish(path: Path, text: str | Iterable[str], *, what: str) -> Path:
    """Write ``text`` (or its parts, each encoded and written as it comes: a big page is
    never held whole) to ``path`` atomically, as UTF-8; a place that cannot be written is
    a usage error naming it (``what``: the option that named it)."""
    data = text.encode("utf-8") if isinstance(text, str) else (p.encode("utf-8") for p in text)
    try:
        atomic_write(path, data, mode=0o666 & ~_umask())
    except OSError as exc:
        raise UsageError(f"{what}: cannot write {path}: {exc.strerror or exc}") from None
    return path


def _umask() -> int:
    # Reading the umask means setting it: put it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current


def rotate_log(path: Path, max_bytes: int) -> bool:
    """A log a person points us at (``batch --log``), kept bounded: moved to ``path.1``
    (replacing the one before) once it holds ``max_bytes`` or more; whether it was."""
    try:
        if path.stat().st_size < max_bytes:
            return False
    except FileNotFoundError:
        return False
    os.replace(path, path.with_name(path.name + ".1"))
    return True
