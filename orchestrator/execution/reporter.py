"""What a run tells people, as the run loop sees it: its lines as it goes (``Reporter``)
and, when it stops and needs a person, the hand-off's text (``Handoffs``); the terminal's
(``cli/console.py``) and the Markdown (``reports/handoff.py``) are handed in from above."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from orchestrator.domain.runs import Attempt, RunRecord
    from orchestrator.storage.base_checks import BaseCheck


class Reporter(Protocol):
    """What the run loop says as it goes. Each says nothing unless a reporter says it:
    a class naming this protocol as its base inherits silence for what it leaves out."""

    def run_opened(self, record: RunRecord, *, resumed: bool) -> None:
        return None

    def stage_started(self, stage: str, attempt: int, detail: str) -> None:
        return None

    def tick(self, label: str, elapsed_s: float) -> None:
        return None

    def stage_finished(self, attempt: Attempt) -> None:
        return None

    def note(self, text: str) -> None:
        return None

    def run_finished(self, record: RunRecord) -> None:
        return None


class QuietReporter(Reporter):
    """For the batch: nothing per stage (each ticket gets one summary line from the
    batch itself; the details are in the run's files)."""


@dataclass(frozen=True)
class HandoffFacts:
    """The decision that stopped the run, and where its evidence lies."""

    why: str
    verdict_number: int
    source: str
    action: str  # as proposed (a rejected proposal's own action, not abandon-human)
    reason: str
    record_path: Path
    verdict_path: Path
    bundle_path: str | None
    halt: str = ""  # the halt reason the run ends with (HaltReason's value)


@dataclass(frozen=True)
class Handoffs:
    """The hand-off's text when a run stops (the abandon action writes it), and when the
    base is red before any change (the base check)."""

    stopped: Callable[[RunRecord, HandoffFacts], str]
    base_red: Callable[[RunRecord, Sequence[BaseCheck]], str]
