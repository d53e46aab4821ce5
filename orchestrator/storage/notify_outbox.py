"""What notifying each ``[[notify]]`` target of each run's event came to:
``notify/<run-id>.<event>-<n>.<target>.json``, written atomically *after* the send.

That order is the rule of issue 28: a crash between sending and recording may send a
notice twice, never zero times — the next ``after_run`` or batch catch-up finds no record
and sends again. A record that says ``failed`` is tried again until it has had
``MAX_PASSES`` passes; one that says ``sent`` is never sent again.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from orchestrator.domain.errors import StateError
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.validation import Frozen
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import StateLayout, run_record_paths
from orchestrator.storage.runs import read_record_file

# Passes (each up to three tries) a failed notice gets, across runs and batches.
MAX_PASSES: Final = 3


class OutboxEntry(Frozen):
    """One target's notice of one occasion: its fate so far."""

    run_id: str
    event: str
    number: int
    target: int
    target_name: str  # ``slack $SLACK_URL``: the variable's name, never the URL
    status: Literal["sent", "failed"]
    tries: int
    passes: int
    at: datetime
    error: str | None = None  # scrubbed of the URL and redacted by the sender
    back_off_s: tuple[float, ...] = ()  # the waits between this pass's tries

    @property
    def settled(self) -> bool:
        """Nothing more is sent for it: it went, or it has used its passes."""
        return self.status == "sent" or self.passes >= MAX_PASSES


class NotifyOutbox:
    """The outbox of one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.layout = StateLayout(state_dir)

    def read(self, run_id: str, event: str, number: int, target: int) -> OutboxEntry | None:
        """The entry, or None when there is none or it cannot be read: then the notice
        is sent (again), never skipped."""
        path = self.layout.notify_record_path(run_id, event, number, target)
        try:
            return OutboxEntry.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            return None

    def write(self, entry: OutboxEntry) -> Path:
        path = self.layout.notify_record_path(entry.run_id, entry.event, entry.number, entry.target)
        data = json.dumps(entry.model_dump(mode="json"), indent=2) + "\n"
        atomic_write(path, data.encode())
        return path

    def entries(self) -> list[OutboxEntry]:
        """Every entry that reads, in name order (for tests and ``jq``'s readers)."""
        found = []
        for path in sorted(self.layout.notify_dir.glob("*.json")):
            try:
                found.append(OutboxEntry.model_validate_json(path.read_bytes()))
            except (OSError, ValueError):
                continue
        return found

    def recent_runs(self, since_epoch_s: float) -> list[RunRecord]:
        """The runs whose record was written at or after ``since_epoch_s``: what a batch's
        catch-up looks at (older runs are never notified late)."""
        found = []
        for path in run_record_paths(self.layout.runs_dir):
            try:
                if path.stat().st_mtime < since_epoch_s:
                    continue
                found.append(read_record_file(path))
            except (OSError, ValueError, StateError):
                continue
        return found
