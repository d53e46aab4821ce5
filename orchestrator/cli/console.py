"""What a person (or cron's mail) sees while a ticket runs, the run loop's ``Reporter``
printed: on a terminal, one status line redrawn in place with the running stage and its
elapsed time (``NO_COLOR`` honoured); anywhere else (cron, a pipe, a file), plain lines,
no escape codes, no redraws. And the services of a command run from here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from orchestrator.app.services import Services, build_services
from orchestrator.execution.reporter import Reporter
from orchestrator.reading.error_lines import error_lines_of, last_error_line_of
from orchestrator.reports.attempt_line import attempt_summary
from orchestrator.reports.handoff import MARKDOWN
from orchestrator.storage.layout import StateLayout

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig
    from orchestrator.domain.runs import Attempt, RunRecord


class PlainReporter(Reporter):
    """Line-oriented output for logs and cron: one line per event, nothing redrawn."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def run_opened(self, record: RunRecord, *, resumed: bool) -> None:
        if record.state == "completed":
            self._line(
                f"{record.ticket_id}: already completed in run {record.run_id} "
                "(pass --rerun to run it again)"
            )
        elif resumed:
            self._line(f"{record.ticket_id}: resuming run {record.run_id} ({record.state})")
        else:
            self._line(f"{record.ticket_id}: run {record.run_id} started")

    def stage_started(self, stage: str, attempt: int, detail: str) -> None:
        # ``detail`` names the check when a check stage starts each of its checks.
        self._line(f"  {stage}: {detail or 'started'} (attempt {attempt})")

    def stage_finished(self, attempt: Attempt) -> None:
        # A failure with what the failed program said of it: the console names the first
        # cause where it happens, not only a later symptom; and under it its last error
        # lines (redacted, bounded), when they say more than that one.
        said = [] if attempt.ok else error_lines_of(attempt.failed_log)
        last = None if attempt.ok else last_error_line_of(attempt.failed_log)
        summary = attempt_summary(attempt) + (f": {last}" if last else "")
        self._line(f"  {attempt.stage}: {self._mark(attempt)}{summary}")
        for line in said if len(said) > 1 else []:
            self._line(f"    | {line}")

    def _mark(self, attempt: Attempt) -> str:
        return ""

    def note(self, text: str) -> None:
        self._line(f"  note: {text}")

    def run_finished(self, record: RunRecord) -> None:
        """Its state, why it halted, where to look."""
        self._line(f"{record.ticket_id}: {record.state} (run {record.run_id})")
        if record.halt is not None:
            halt = record.halt
            self._line(f"  halted: {halt.reason} at stage {halt.stage}: {halt.detail}")
        if record.pull_request:
            self._line(f"  pull request: {record.pull_request}")
        layout = StateLayout.of_run_dir(Path(record.run_dir))
        self._line(f"  state: {layout.record_path(record.run_id)}")
        self._line(f"  logs:  {layout.logs_dir(record.run_id)}/")


class TtyReporter(PlainReporter):
    """Plain lines for events, plus a status line redrawn in place while a stage runs."""

    def __init__(self, out: TextIO, *, color: bool) -> None:
        super().__init__(out)
        self.color = color
        self._status_shown = False

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _clear(self) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[2K")
            self._status_shown = False

    def _line(self, text: str) -> None:
        self._clear()
        super()._line(text)

    def tick(self, label: str, elapsed_s: float) -> None:
        self.out.write("\r\x1b[2K" + self._paint(f"  … {label} running for {elapsed_s:.0f}s", "2"))
        self.out.flush()
        self._status_shown = True

    def _mark(self, attempt: Attempt) -> str:
        return (self._paint("ok", "32") if attempt.ok else self._paint("FAILED", "31")) + " "


def reporter_for(out: TextIO, environ: Mapping[str, str] = os.environ) -> PlainReporter:
    """A redrawing reporter on a terminal, plain lines anywhere else."""
    if out.isatty() and environ.get("TERM") != "dumb":
        return TtyReporter(out, color=not environ.get("NO_COLOR"))
    return PlainReporter(out)


def terminal_services(
    loaded: LoadedConfig, state_dir_override: str | None, out: TextIO, environ: Mapping[str, str]
) -> Services:
    """The services of a command run here: ``out``'s reporter, the hand-off as Markdown."""
    return build_services(
        loaded, state_dir_override, environ, reporter=reporter_for(out, environ), handoffs=MARKDOWN
    )
