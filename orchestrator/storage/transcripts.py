"""Reply texts of a decision's call transcript, stored content-addressed beside its
verdict file: ``runs/<run-id>.replies/<sha256>.txt``, one file per distinct text (model
replies and investigation tool results), named by the sha256 of its UTF-8 bytes.

Written once, before the verdict file that references them, and never rewritten: a text
with a given name is that text. Stored whole — no cut — so a reply of any length
replays as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

_DIGEST: Final = re.compile(r"^[0-9a-f]{64}$")
# Files written before texts were made valid UTF-8 may hold lone surrogates in
# surrogatepass form: they still read, and still hash to their names.
_ENCODING_ERRORS: Final = "surrogatepass"


def replies_dir(runs_dir: Path, run_id: str) -> Path:
    return StateLayout(runs_dir.parent).replies_dir(run_id)


def _path(directory: Path, digest: str) -> Path:
    if not _DIGEST.match(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return directory / f"{digest}.txt"


def write_texts(directory: Path, texts: Mapping[str, str]) -> list[str]:
    """Store every text under its digest, as valid UTF-8; one already there is kept.
    The transcript stores texts with lone surrogates already replaced; one that still
    has any is stored with U+FFFD in their place (its digest then names the text as it
    came, so replay reports it changed) and is returned: what had to be replaced."""
    replaced = []
    for digest, text in texts.items():
        path = _path(directory, digest)
        if path.exists():
            continue
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            data = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text).encode()
            replaced.append(digest)
        atomic_write(path, data)
        crash_point(CrashPoint.REPLY_TEXTS)
    return replaced


def read_texts(directory: Path, digests: Iterable[str]) -> dict[str, str]:
    """The stored texts of ``digests``; a missing or unreadable one is left out (the
    caller reports it), a malformed digest too."""
    found: dict[str, str] = {}
    for digest in digests:
        try:
            data = _path(directory, digest).read_bytes()
        except (OSError, ValueError):
            continue
        found[digest] = data.decode("utf-8", _ENCODING_ERRORS)
    return found
