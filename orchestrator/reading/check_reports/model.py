"""The common record of every report format, and the reading being built from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from orchestrator.domain.validation import Frozen
from orchestrator.reading.check_reports.limits import (
    MAX_NOTES,
    MESSAGE_CHARS,
    NAME_CHARS,
    TRACE_CHARS,
)
from orchestrator.reading.check_reports.text import _one_line

ReportFormat = Literal["junit", "sarif", "tap"]

_Message = Annotated[str, Field(max_length=MESSAGE_CHARS)]
_Short = Annotated[str, Field(max_length=NAME_CHARS)]


class ReportCase(Frozen):
    """One failing case a report names.

    ``kind`` is JUnit's distinction: ``error`` when the case could not run as written (an
    exception outside an assertion, a fixture or set-up failure, a TAP ``Bail out!``),
    ``failure`` otherwise. Every SARIF result is a ``failure``: a finding is the tool's
    verdict on the code, as an assertion is, whatever its SARIF level."""

    format: ReportFormat
    report: Annotated[str, Field(max_length=4096)]
    name: _Short
    kind: Literal["failure", "error"]
    message: _Message
    location: _Short | None
    trace: Annotated[str, Field(max_length=TRACE_CHARS)]


class ReportReading(Frozen):
    """What a check's reports say failed. ``cases`` are the first ``max_cases`` failing
    ones in report order; ``failing`` counts all of them; ``notes`` say what was skipped
    or cut short, and why."""

    cases: tuple[ReportCase, ...] = ()
    failing: Annotated[int, Field(ge=0)] = 0
    reports_read: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass
class _Collector:
    """The reading being built, across every report of one call."""

    max_cases: int
    cases: list[ReportCase] = field(default_factory=list)
    failing: int = 0
    reports_read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_notes: int = 0

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(_one_line(text, 400))
        else:
            self.dropped_notes += 1

    def wants_case(self) -> bool:
        return len(self.cases) < self.max_cases

    def add(self, case: ReportCase) -> None:
        if self.wants_case():
            self.cases.append(case)

    def reading(self) -> ReportReading:
        notes = list(self.notes)
        if self.dropped_notes:
            notes.append(f"{self.dropped_notes} more notes not kept")
        return ReportReading(
            cases=tuple(self.cases),
            failing=self.failing,
            reports_read=tuple(self.reports_read),
            notes=tuple(notes),
        )
