"""``batch --log FILE``: the command's own output — every line it prints, its errors
included — appended to FILE, so a cron line or a systemd service needs no redirection
that a fresh setup cannot satisfy. The file stays bounded: when it has reached
``MAX_BYTES`` at the start of a batch it becomes ``FILE.1`` (replacing the one before),
and the batch starts a new one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.domain.errors import UsageError
from orchestrator.storage.published import rotate_log

MAX_BYTES = 10 * 1024 * 1024


@contextmanager
def logging_to(path: Path, max_bytes: int = MAX_BYTES) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` appended to ``path`` (line-buffered: a killed
    batch leaves every line it printed) until the block ends."""
    if not path.parent.is_dir():
        raise UsageError(f"batch --log: {path.parent} is not a directory")
    if path.is_dir():
        raise UsageError(f"batch --log: {path} is a directory")
    rotate_log(path, max_bytes)
    with open(path, "a", encoding="utf-8", errors="replace", buffering=1) as log:
        before = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            sys.stdout, sys.stderr = before
