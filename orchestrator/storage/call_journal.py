"""The replies a decision in progress has had, persisted as each arrives:
``runs/<run-id>.replies/pending-<n>.json`` for decision ``n``.

The verdict file is written once the whole decision is made; a process killed after a
model call returned and before that file would otherwise ask (and pay for) the same
call again on resume. The resumed decision is answered from here instead, request by
request, for as long as its requests are the ones recorded (by digest, in order).
Removed once the verdict file and its ledger rows are written.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.domain.validation import Frozen
from orchestrator.storage._atomic import atomic_write, remove_file
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout


class JournaledReply(Frozen):
    """One call: the digest of what was asked, and what came back (a ``ModelReply``)."""

    request_sha256: str
    text: str | None
    model: str
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    error_kind: str | None = None


class CallJournal(Frozen):
    decision_id: str
    replies: tuple[JournaledReply, ...] = ()


class CallJournals:
    """Callers hold the ticket's lock: read-modify-write here does not race."""

    def __init__(self, state_dir: Path) -> None:
        self._layout = StateLayout(state_dir)

    def path(self, run_id: str, number: int) -> Path:
        return self._layout.replies_dir(run_id) / f"pending-{number}.json"

    def load(self, run_id: str, number: int, decision_id: str) -> tuple[JournaledReply, ...]:
        """The replies recorded for this decision; none for another decision that had
        the number (a journal whose decision was never written)."""
        try:
            journal = CallJournal.model_validate(json.loads(self.path(run_id, number).read_bytes()))
        except FileNotFoundError:
            return ()
        except (OSError, ValueError):
            return ()  # written atomically, so damaged by hand: ask again rather than trust it
        if journal.decision_id != decision_id:
            return ()
        return journal.replies

    def append(self, run_id: str, number: int, decision_id: str, reply: JournaledReply) -> None:
        recorded = self.load(run_id, number, decision_id)
        journal = CallJournal(decision_id=decision_id, replies=(*recorded, reply))
        # ASCII JSON: a reply holding a lone surrogate (it has no UTF-8 form) is kept as
        # an escape and read back as it came, so its replay decides exactly as it did.
        data = json.dumps(journal.model_dump(), indent=1, ensure_ascii=True).encode()
        atomic_write(self.path(run_id, number), data)
        crash_point(CrashPoint.MODEL_REPLY)

    def discard(self, run_id: str, number: int) -> None:
        remove_file(self.path(run_id, number))
