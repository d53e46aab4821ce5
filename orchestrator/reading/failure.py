"""A failed stage's or check's log, read: its failure class and what named it, its ranked
evidence, its last error line. The one entry point is ``read_failure``; the parts it puts
together are this package's modules:

    signs.py        the named signs of infrastructure failures, read up from the end
    evidence.py     the root-cause lines anywhere in the window: signatures, error words,
                    a learned prefix (prefix.py), ranked (ranking.py) by rarity and by a
                    baseline of green runs (baseline.py), excerpted within a budget
    long_log.py     where a long log says why it stopped when its last lines do not
    error_lines.py  the last error line (the one a person is shown) and those before it
    check_reports/  the failing cases of the reports a check declares (JUnit, SARIF, TAP)

Engines classify their own error events (``engines.classify``); everything here is about
programs that are not engines, and about logs.

Reads the log; writes nothing; pure otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from orchestrator.domain.log_line import without_prefix
from orchestrator.domain.terminal import plain
from orchestrator.engines.base import FailureClass
from orchestrator.engines.classify import missing_executable, output_lines
from orchestrator.reading.bulk import file_stretches, read_up_stretches
from orchestrator.reading.evidence import Evidence, extract_evidence
from orchestrator.reading.long_log import last_marker, root_cause_regions
from orchestrator.reading.scan import scan_hits
from orchestrator.reading.signs import FAILURE_MARKER, Recognised, read_up, tail_lines
from orchestrator.redaction import redact

__all__ = [
    "DEFAULT_SCAN_BYTES",
    "FAILURE_MARKER",
    "NAMED_TAIL_BYTES",
    "NamedFailure",
    "Outcome",
    "Reading",
    "failure_named_in",
    "failure_of_check",
    "failure_of_output",
    "failure_of_stage",
    "log_tail",
    "marked_failure",
    "read_failure",
    "read_named",
]

# What a failed stage or check's own output is read for: its last words.
NAMED_TAIL_BYTES = 64 * 1024
# When those decide nothing, how far up a long log is read (``long_log``).
DEFAULT_SCAN_BYTES = 64 * 1024 * 1024
# The runner's own lines in a stage's log (``engines.classify.output_lines``): not read.
RUNNER_LINES = ("# orchestrator: ", "# $ ")


class Outcome(Protocol):
    """What ended a process, as far as reading its failure needs (``runner.ProcessOutcome``)."""

    @property
    def ok(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def log_path(self) -> Path: ...


def log_tail(path: Path, max_bytes: int) -> str:
    """The end of a log, read by seeking: the cost does not grow with the log."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def marked_failure(text: str) -> FailureClass | None:
    """The last ``::failure-class::<class>`` a stage printed, if it names one we know (a
    line as a reader sees it: after colours and a CI runner's or build tool's prefix)."""
    found: FailureClass | None = None
    for line in map(without_prefix, plain(text).splitlines()):
        if line.startswith(FAILURE_MARKER):
            name = (
                line[len(FAILURE_MARKER) :].strip().split()[0]
                if line[len(FAILURE_MARKER) :].strip()
                else ""
            )
            try:
                found = FailureClass(name)
            except ValueError:
                continue
    return found


@dataclass(frozen=True)
class NamedFailure:
    """An infrastructure class a failed stage or check's output names, and what named it
    (None for a ``::failure-class::`` line: the program chose the class itself)."""

    failure: FailureClass
    detail: str | None


def failure_named_in(output: str, *, exit_code: int | None, timed_out: bool) -> NamedFailure | None:
    """For a failed stage or check that is not an engine: the class its own
    ``::failure-class::`` line names (that program knows best), else the infrastructure
    sign its output ends with (``signs.recognise``), else None: a failure of the code."""
    found = read_named(output, exit_code=exit_code, timed_out=timed_out)
    return found if isinstance(found, NamedFailure) else None


def read_named(
    output: str, *, exit_code: int | None, timed_out: bool
) -> NamedFailure | Literal["code"] | None:
    """``failure_named_in``, saying also whether the lines read ended on the code's own
    failure (``CODE``) or decided nothing (None: the caller may read further up)."""
    marked = marked_failure(output)
    if marked is not None:
        return NamedFailure(marked, None)
    # The runner's header and footer are ours, not the program's (the argv may name a host).
    own = "\n".join(output_lines(output))
    found = read_up(reversed(tail_lines(own)), exit_code=exit_code, timed_out=timed_out)
    if isinstance(found, Recognised):
        return NamedFailure(found.failure, found.detail())
    return found


def failure_of_stage(
    outcome: Outcome, *, scan_bytes: int = DEFAULT_SCAN_BYTES
) -> NamedFailure | None:
    """For a stage that is not an engine: a program that is not there, a timeout, or the
    infrastructure class its output names (``failure_of_output``)."""
    if outcome.ok:
        return None
    if missing_executable(outcome.error) is not None:
        return NamedFailure(FailureClass.CONFIG_ERROR, None)
    if outcome.timed_out:
        return NamedFailure(FailureClass.TIMEOUT, None)
    return failure_of_output(
        outcome.log_path, exit_code=outcome.exit_code, timed_out=False, scan_bytes=scan_bytes
    )


def failure_of_check(
    outcome: Outcome, *, scan_bytes: int = DEFAULT_SCAN_BYTES
) -> NamedFailure | None:
    """For a review check, read like a stage: a program that is not there, else the class
    its output names. A timeout stays the check's own failure (a hanging test is the
    code's), so it is not read for signs."""
    if missing_executable(outcome.error) is not None:
        return NamedFailure(FailureClass.CONFIG_ERROR, outcome.error)
    if outcome.ok or outcome.timed_out:
        return None
    return failure_of_output(
        outcome.log_path, exit_code=outcome.exit_code, timed_out=False, scan_bytes=scan_bytes
    )


def failure_of_output(
    log_path: Path,
    *,
    exit_code: int | None,
    timed_out: bool,
    scan_bytes: int = DEFAULT_SCAN_BYTES,
) -> NamedFailure | None:
    """The class a failed stage or check names in its log (``::failure-class::``, or a
    recognised sign of exhausted resources, the network or a missing program), with its
    detail redacted: the detail quotes the program's output, which may hold a secret.

    The last words are read first. When they decide nothing (a megabyte of ordinary output
    after the failure: the rest of a test run, a coverage table), the program's last
    ``::failure-class::`` line in the scan window counts, then the lines around its
    root-cause lines (the evidence signatures), read from the lowest one up."""
    named = read_named(
        log_tail(log_path, NAMED_TAIL_BYTES), exit_code=exit_code, timed_out=timed_out
    )
    if named is None and not timed_out:
        named = _named_further_up(log_path, exit_code=exit_code, scan_bytes=scan_bytes)
    if not isinstance(named, NamedFailure):
        return None  # the code's failure, or nothing named
    if named.detail is None:
        return named
    return NamedFailure(named.failure, redact(named.detail))


def _named_further_up(
    log_path: Path, *, exit_code: int | None, scan_bytes: int
) -> NamedFailure | Literal["code"] | None:
    try:
        line = last_marker(log_path, scan_bytes)
        marked = marked_failure(line) if line is not None else None
        if marked is not None:
            return NamedFailure(marked, None)
        below = _below_the_last_cause(log_path, exit_code=exit_code, scan_bytes=scan_bytes)
        if isinstance(below, Recognised):
            return NamedFailure(below.failure, below.detail())
        if below is not None:
            return below
        for region in root_cause_regions(log_path, scan_bytes):
            found = read_named(region, exit_code=exit_code, timed_out=False)
            if found is not None:
                return found
    except OSError:
        return None  # an unreadable log names nothing; the tail's reading stands
    return None


def _below_the_last_cause(
    log_path: Path, *, exit_code: int | None, scan_bytes: int
) -> Recognised | Literal["code"] | None:
    """Every line from the lowest root-cause line of the scan window (the evidence
    signatures' lowest hit; the window's first line when there is none) to the end, read
    up as the tail is (``bulk``): the program's last words when more than the tail's
    worth of ordinary output follows them — a CI's own "No output has been received in
    the last 10 minutes" under a megabyte of a test run's progress. Raises OSError."""
    scan = scan_hits(log_path, scan_bytes, words=True)
    start = max((hit.offset for hit in scan.hits), default=scan.window_start)
    with log_path.open("rb") as fh:
        if not scan.hits and start > 0:  # the window's first whole line
            fh.seek(start - 1)
            start += len(fh.readline()) - 1
        return read_up_stretches(
            file_stretches(fh, start, scan.size),
            exit_code=exit_code,
            timed_out=False,
            ignore=RUNNER_LINES,
        )


@dataclass(frozen=True)
class Reading:
    """One failed log, read. ``named``: the class something in the log (or the way the
    process ended) named, with what named it (redacted), None when it is the code's
    failure; ``evidence``: the ranked excerpts (each naming what kept its lines) and
    whether a cause is stated outright, when asked for."""

    named: NamedFailure | None
    log_path: Path
    evidence: Evidence | None = None

    @property
    def failure(self) -> FailureClass:
        return self.named.failure if self.named is not None else FailureClass.CODE


def read_failure(
    outcome: Outcome,
    *,
    kind: Literal["stage", "check"],
    scan_bytes: int = DEFAULT_SCAN_BYTES,
    evidence_bytes: int | None = None,
    known: Callable[[bytes], bool] | None = None,
) -> Reading:
    """The one entry point: a failed stage's or check's log read for its class (as
    ``failure_of_stage`` / ``failure_of_check``) and, when
    ``evidence_bytes`` is given, its evidence within that budget (``known``: a
    baseline's ``knows``). Used by the driver (``execution.attempts``) and the eval; the
    bundle asks ``evidence.extract_evidence`` itself, for its tail-aware excerpts."""
    read = failure_of_check if kind == "check" else failure_of_stage
    named = read(outcome, scan_bytes=scan_bytes)
    evidence = None
    if evidence_bytes is not None:
        try:
            evidence = extract_evidence(
                outcome.log_path, window_bytes=scan_bytes, max_bytes=evidence_bytes, known=known
            )
        except OSError:
            evidence = None
    return Reading(named=named, log_path=outcome.log_path, evidence=evidence)
