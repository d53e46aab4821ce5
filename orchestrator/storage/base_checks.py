"""Base checks on disk: what a review check said on a base commit, before any ticket's
change (``base_checks/<repo>/<commit>/<check>-<digest>.json``, ``layout.py``), with the
check's log kept beside it (``.log``).

A cache, keyed by the repository, the commit, the check's name and a digest of how it is
configured (``check_digest``): a second ticket on the same base, or a run resumed after a
kill, reads the answer instead of running the check again. Green and red are both kept
(a commit does not change). A file that does not read back is as good as none: the check
runs again and its result replaces it. Written atomically, then the ``base-check`` crash
point.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from orchestrator.domain.config import CheckConfig
from orchestrator.domain.runs import StageText
from orchestrator.domain.sandbox import SandboxOptions
from orchestrator.domain.validation import Frozen
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

# A stored result bigger than this is not one we wrote (the reading is capped in bytes).
_MAX_FILE_BYTES = 1 << 20


class BaseCheckKey(NamedTuple):
    """What a base check's result depends on: where, which commit, which check, and how
    that check is configured (``check_digest``)."""

    repository: str
    commit: str
    check: str
    digest: str


class BaseCheck(Frozen):
    """One review check's result on a base commit."""

    repository: str
    commit: str
    check: str
    digest: str
    passed: bool
    exit_code: int | None
    timed_out: bool = False
    # The failure reading: the log's ranked root-cause excerpts, as a diagnosis bundle
    # would show them (redacted); empty for a green check.
    reading: StageText = None
    log_path: str | None = None
    checked_at: datetime
    duration_s: float = 0.0

    @property
    def key(self) -> BaseCheckKey:
        return BaseCheckKey(self.repository, self.commit, self.check, self.digest)


def check_digest(check: CheckConfig, options: SandboxOptions) -> str:
    """16 hex digits of a hash of everything configured about ``check`` that could change
    what it says (its command, timeout, kinds, reports, and the sandbox it runs in), but
    not what is done with a red base (``on_red_base``). Pure."""
    configured = check.model_dump(mode="json", exclude={"on_red_base"})
    text = json.dumps(
        {"check": configured, "sandbox": options.model_dump(mode="json")}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class BaseCheckStore:
    """The base checks of one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.layout = StateLayout(state_dir)

    def path(self, key: BaseCheckKey) -> Path:
        return self.layout.base_check_path(*key)

    def log_path(self, key: BaseCheckKey) -> Path:
        """Where the check's log on the base is written (its directory made)."""
        path = self.path(key).with_suffix(".log")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def load(self, key: BaseCheckKey) -> BaseCheck | None:
        """The stored result for ``key``; None when there is none, or it does not read
        back as the result of that very key (then the check is run again)."""
        path = self.path(key)
        try:
            if path.stat().st_size > _MAX_FILE_BYTES:
                return None
            found = BaseCheck.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError):
            return None
        return found if found.key == key else None

    def save(self, result: BaseCheck) -> Path:
        path = self.path(result.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, result.model_dump_json(indent=2).encode())
        crash_point(CrashPoint.BASE_CHECK)
        return path
