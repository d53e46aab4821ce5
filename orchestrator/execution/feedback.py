"""The "previous attempt" section an engine re-run's prompt carries, read from the files
the decision left: the run record's failed attempt, the verdict file and the bundle file
(``recovery/context/feedback.py`` writes the text from them).

Which decision a stage's next attempt is told about is in the run record
(``RunRecord.feedback``, set when a re-run after a code failure is carried out), so a
resumed or redelivered run tells it the same thing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from orchestrator.domain.errors import StateError
from orchestrator.domain.runs import Attempt, RunRecord
from orchestrator.recovery.context.feedback import (
    Diagnosis,
    FailedAttempt,
    previous_attempt_section,
)
from orchestrator.recovery.context.model import ContextBundle
from orchestrator.storage import Decisions


def _failed_attempt(record: RunRecord, number: int) -> FailedAttempt | None:
    attempt: Attempt | None = next((a for a in record.attempts if a.number == number), None)
    if attempt is None:
        return None
    check = attempt.failing_check
    return FailedAttempt(
        number=attempt.number,
        stage=attempt.stage,
        check=check.name if check is not None else None,
        command=check.command if check is not None else attempt.command,
        exit_code=check.exit_code if check is not None else attempt.exit_code,
        timed_out=check.timed_out if check is not None else attempt.timed_out,
        detail=attempt.failure_detail or attempt.error,
    )


def _bundle(path: str | None) -> ContextBundle | None:
    if path is None:
        return None
    try:
        return ContextBundle.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError):
        # The section still says what failed and what was decided; it says no reading
        # was kept rather than failing the re-run.
        return None


def engine_feedback(record: RunRecord, stage: str, decisions: Decisions) -> str | None:
    """The section for ``stage``'s next attempt, or None when it is told nothing (its
    first attempt, a re-run after an infrastructure failure, feedback switched off)."""
    number = record.feedback.get(stage)
    if number is None:
        return None
    try:
        verdict = decisions.read(record.run_id, number)
    except StateError:
        return None
    failed = _failed_attempt(record, verdict.attempt)
    if failed is None:
        return None
    diagnosis = Diagnosis(
        number=number,
        source=verdict.source,
        action=verdict.verdict.action,
        summary=verdict.verdict.summary,
    )
    return previous_attempt_section(failed, diagnosis, _bundle(verdict.bundle_path))
