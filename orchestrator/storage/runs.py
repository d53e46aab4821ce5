"""Run state under ``<state_dir>/runs``: one JSON record per run, written atomically after
every transition, plus a per-ticket lock so two processes never drive one ticket.

Names and places come from ``layout.py``:
    runs/<run-id>.json            the run record (RunRecord below)
    runs/<run-id>/ticket/         snapshot of the ticket and the files it refers to
    runs/<run-id>/clone/          the working clone
    runs/<run-id>/logs/           one log per attempt (and per check)
    locks/<ticket-id>.lock        flock held while a process drives the ticket
"""

from __future__ import annotations

import json
import secrets
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from orchestrator.domain.errors import StateError
from orchestrator.domain.lifecycle import HaltReason, RunState, check_resume, check_transition
from orchestrator.domain.validation import Frozen, read_model
from orchestrator.recovery.redact import redact
from orchestrator.storage.atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout, is_run_id, run_record_paths
from orchestrator.storage.locks import holder_lock

SCHEMA_VERSION: Literal[1] = 1


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)


# Text that came from a stage or an engine: redacted whenever a record is read, so a file
# written before redaction happened at the source prints no secret either (``show
# --json``, the verdict file). Redaction is idempotent: reading twice changes nothing.
StageText = Annotated[str | None, AfterValidator(_redacted)]


class AttemptStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    # The orchestrator died or was interrupted while this attempt ran; its result is unknown.
    INTERRUPTED = "interrupted"


class StageStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"


class CheckResult(Frozen):
    name: str
    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool = False
    skipped: bool = False
    duration_s: float = 0.0
    log_path: str | None = None
    error: StageText = None
    # A failed check's infrastructure class (its ``::failure-class::`` line or a
    # recognised sign: network, resource_exhausted, ...) and what was recognised,
    # redacted. Absent from records written before checks were classified.
    failure_class: str | None = None
    failure_detail: StageText = None
    # "bwrap", or "none" when its config opted it out. Absent from older records.
    sandbox: str | None = None

    @property
    def passed(self) -> bool:
        return self.skipped or (self.exit_code == 0 and not self.timed_out)


class FailingCheck(Frozen):
    name: str
    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    log_path: str | None


class Attempt(Frozen):
    number: Annotated[int, Field(ge=1)]
    stage: str
    status: AttemptStatus
    command: tuple[str, ...] = ()
    engine: str | None = None
    model: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    timed_out: bool = False
    signal: int | None = None
    error: StageText = None
    log_path: str | None = None
    pgid: int | None = None
    start_ticks: int | None = None
    checks: tuple[CheckResult, ...] = ()
    failing_check: FailingCheck | None = None
    # What an engine reported about itself, and how a failure was classified: ``code``
    # goes to the recovery decision, any other class is infrastructure. An engine may
    # exit 0 and still have failed (aider does, when every API call failed).
    turns: int | None = None
    cost_usd: float | None = None
    final_message: StageText = None
    failure_class: str | None = None
    failure_detail: StageText = None
    # "bwrap", or "none" when its config opted it out (a check stage: per check, on
    # each CheckResult). Absent from records written before every stage was sandboxed.
    sandbox: str | None = None

    @property
    def ok(self) -> bool:
        return (
            self.status is AttemptStatus.FINISHED
            and self.exit_code == 0
            and not self.timed_out
            and self.failure_class is None
        )


class StageRecord(Frozen):
    name: str
    status: StageStatus = StageStatus.PENDING


class Counters(Frozen):
    attempts: int = 0
    retries: int = 0
    diagnoses: int = 0


class StageOverride(Frozen):
    """Engine/model chosen by a verdict (escalate-model, switch-engine) for later attempts."""

    engine: str
    model: str | None


class VerdictRef(Frozen):
    """A decision taken in this run: where its file is, and what came of it."""

    number: int
    attempt: int
    source: str
    action: str
    path: str
    outcome: str | None = None
    # The verdict file's sha256 when the run took the decision: a file changed after it
    # (while it waits for a person, say) is approved by nobody and carried out never.
    # Absent from records written before it was kept.
    sha256: str | None = None

    def changed(self, digest: str) -> str | None:
        """Why the verdict file hashing to ``digest`` is not the one decided, or None."""
        if self.sha256 is None or digest == self.sha256:
            return None
        return (
            f"the verdict file changed after the run took the decision "
            f"(sha256 {self.sha256[:12]}… then, {digest[:12]}… now)"
        )


class Halt(Frozen):
    reason: HaltReason
    stage: str | None
    detail: str


class ResumeRecord(Frozen):
    """A person resumed the stopped run: who, when, from which state and halt, and the
    stage it went on from."""

    at: datetime
    by: str
    from_state: RunState
    halt: Halt | None = None
    stage: str


class RunRecord(Frozen):
    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    ticket_id: str
    ticket_title: str
    ticket_kind: str
    ticket_path: str
    ticket_snapshot: str
    ticket_sha256: str
    repository: str
    base_branch: str
    work_branch: str
    config_path: str
    config_sha256: str
    run_dir: str
    clone_dir: str
    created_at: datetime
    updated_at: datetime
    state: RunState = RunState.PENDING
    current_stage: str | None = None
    stages: tuple[StageRecord, ...]
    attempts: tuple[Attempt, ...] = ()
    counters: Counters = Counters()
    halt: Halt | None = None
    pull_request: str | None = None
    overrides: dict[str, StageOverride] = Field(default_factory=dict)
    verdicts: tuple[VerdictRef, ...] = ()
    handoff: str | None = None
    sub_tickets: tuple[str, ...] = ()
    resumes: tuple[ResumeRecord, ...] = ()  # absent from records written before resume

    def stage_status(self, name: str) -> StageStatus:
        for stage in self.stages:
            if stage.name == name:
                return stage.status
        raise KeyError(name)

    def with_stage_status(self, name: str, status: StageStatus) -> RunRecord:
        stages = tuple(
            s.model_copy(update={"status": status}) if s.name == name else s for s in self.stages
        )
        return self.model_copy(update={"stages": stages})

    def reset_stages_from(self, name: str) -> RunRecord:
        """``name`` and every stage after it go back to pending (they will run again)."""
        names = [s.name for s in self.stages]
        start = names.index(name)
        stages = tuple(
            s.model_copy(update={"status": StageStatus.PENDING}) if i >= start else s
            for i, s in enumerate(self.stages)
        )
        return self.model_copy(update={"stages": stages})

    def with_verdict(self, ref: VerdictRef) -> RunRecord:
        others = tuple(v for v in self.verdicts if v.number != ref.number)
        return self.model_copy(update={"verdicts": (*others, ref)})

    def last_failed_attempt(self) -> Attempt | None:
        finished = [a for a in self.attempts if a.status is AttemptStatus.FINISHED]
        return finished[-1] if finished and not finished[-1].ok else None

    def with_attempt(self, attempt: Attempt) -> RunRecord:
        """Add ``attempt``, or replace the one with its number."""
        others = tuple(a for a in self.attempts if a.number != attempt.number)
        attempts = tuple(sorted((*others, attempt), key=lambda a: a.number))
        return self.model_copy(update={"attempts": attempts})

    def transition(
        self,
        target: RunState,
        *,
        now: datetime,
        halt: Halt | None = None,
        stage: str | None = None,
    ) -> RunRecord:
        """The only way ``state`` changes: checked against the frozen table."""
        check_transition(self.state, target, halt.reason if halt else None)
        return self.model_copy(
            update={
                "state": target,
                "halt": halt,
                "updated_at": now,
                "current_stage": stage if stage is not None else self.current_stage,
            }
        )


def resumed(record: RunRecord, *, at: datetime, by: str, stage: str) -> RunRecord:
    """``record`` resumed by a person at ``stage``: checked against ``RESUMES``; the stages
    from ``stage`` on are pending again, those before it are kept; the halt is kept in
    the resume's entry, not on the record."""
    check_resume(record.state, record.halt.reason if record.halt else None)
    entry = ResumeRecord(at=at, by=by, from_state=record.state, halt=record.halt, stage=stage)
    return record.reset_stages_from(stage).model_copy(
        update={
            "state": RunState.RUNNING,
            "halt": None,
            "updated_at": at,
            "current_stage": stage,
            "resumes": (*record.resumes, entry),
        }
    )


def new_run_id(ticket_id: str, now: datetime) -> str:
    """Sortable by time, unique across processes: ``CARDS-1-20261130T014500Z-3fa2``."""
    return f"{ticket_id}-{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def read_record_file(path: Path) -> RunRecord:
    """Parse and validate one run record; StateError names the path and the reason."""
    record = read_model(path, RunRecord, "run record")
    if record is None:
        raise StateError(f"state error: {path}: no such run record")
    return record


class RunStore:
    """Run records on disk. Small on purpose: a later backend (a queue worker's shared
    store) implements the same methods (``protocols.Runs``). The path helpers name the
    files a run leaves beside its record; they come from the state dir's layout."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.layout = StateLayout(state_dir)
        self.runs_dir = self.layout.runs_dir

    def record_path(self, run_id: str) -> Path:
        return self.layout.record_path(run_id)

    def run_dir(self, run_id: str) -> Path:
        return self.layout.run_dir(run_id)

    def verdict_path(self, run_id: str, number: int) -> Path:
        return self.layout.verdict_path(run_id, number)

    def bundle_path(self, run_id: str, number: int) -> Path:
        return self.layout.bundle_path(run_id, number)

    def mechanical_fix_path(self, run_id: str, number: int | None = None) -> Path:
        """Verdict ``number``'s mechanical-fix report; without a number, the run's latest
        (the name older state dirs have, kept up to date beside the numbered ones)."""
        if number is None:
            return self.layout.mechanical_fix_path(run_id)
        return self.layout.mechanical_fix_report_path(run_id, number)

    def handoff_path(self, run_id: str) -> Path:
        return self.layout.handoff_path(run_id)

    def write_bundle(self, run_id: str, number: int, text: str) -> Path:
        """The evidence decision ``number`` is taken on, before it is taken."""
        path = self.bundle_path(run_id, number)
        atomic_write(path, text.encode())
        crash_point(CrashPoint.BUNDLE)
        return path

    def write_handoff(self, run_id: str, text: str) -> Path:
        path = self.handoff_path(run_id)
        atomic_write(path, text.encode())
        crash_point(CrashPoint.HANDOFF)
        return path

    def write_mechanical_fix(self, run_id: str, number: int, report: Mapping[str, Any]) -> Path:
        """Decision ``number``'s mechanical-fix report, rewritten as the fix goes (the
        plan, then the result): its own file, then the same bytes under the run's
        "latest" name, so readers of either see it."""
        data = json.dumps(report, indent=2).encode()
        path = self.layout.mechanical_fix_report_path(run_id, number)
        atomic_write(path, data)
        atomic_write(self.mechanical_fix_path(run_id), data)
        crash_point(CrashPoint.FIX_REPORT)
        return path

    def read_mechanical_fix(self, run_id: str, number: int) -> dict[str, Any] | None:
        """Verdict ``number``'s mechanical-fix report as last written, or None (none yet,
        or not readable: the fix then runs as if it never had)."""
        try:
            report = json.loads(self.layout.mechanical_fix_report_path(run_id, number).read_bytes())
        except (OSError, ValueError):
            return None
        return report if isinstance(report, dict) else None

    def write_workspace_files(self, run_id: str, files: Mapping[Path, str]) -> None:
        """Files a stage's process reads (an engine's prompt), written into the run's
        workspace before it starts. A path outside the workspace is refused: what an
        engine adapter names must not land anywhere else."""
        workspace = self.run_dir(run_id).resolve()
        for path in files:
            if not path.resolve().is_relative_to(workspace):
                raise StateError(f"state error: {path}: outside the run's workspace {workspace}")
        for path, text in files.items():
            atomic_write(path, text.encode())

    def save(self, record: RunRecord, point: CrashPoint | None = None) -> None:
        """Replace the run's record; ``point`` names the step this write persists (the
        crash-point tests kill the process right after it)."""
        with interrupts_held():
            data = record.model_dump_json(indent=2).encode()
        atomic_write(self.record_path(record.run_id), data)
        if point is not None:
            crash_point(point)

    def load(self, run_id: str) -> RunRecord:
        if not is_run_id(run_id):
            raise StateError(f"state error: {run_id!r} is not a run id")
        return read_record_file(self.record_path(run_id))

    def latest_for_ticket(self, ticket_id: str) -> RunRecord | None:
        """The ticket's most recent run. Only this ticket's records are read (by name), so
        another ticket's damaged file cannot block it; a damaged record of its own raises
        StateError with the path and the reason rather than being silently passed over."""
        best: tuple[str, Path] | None = None
        for path in run_record_paths(self.runs_dir, ticket_id):
            try:
                raw = json.loads(path.read_bytes())
            except OSError as exc:
                raise StateError(f"state error: {path}: cannot read: {exc.strerror}") from None
            except ValueError as exc:
                raise StateError(f"state error: {path}: not valid JSON: {exc}") from None
            if not isinstance(raw, dict) or raw.get("ticket_id") != ticket_id:
                raise StateError(f"state error: {path}: not a run record of {ticket_id}")
            created = str(raw.get("created_at", ""))
            if best is None or created > best[0]:
                best = (created, path)
        return read_record_file(best[1]) if best else None


@contextmanager
def ticket_lock(state_dir: Path, ticket_id: str) -> Iterator[None]:
    """Hold an exclusive flock for the ticket; the OS releases it if we crash.
    Raises TicketLocked (naming the holder's pid) instead of waiting."""
    with holder_lock(StateLayout(state_dir).ticket_lock_path(ticket_id), ticket_id):
        yield


@contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then arrive as usual. Serialising a
    record runs inside pydantic's serializer, which turns the Interrupted that the CLI's
    handler raises into a serialization error: an internal error (exit 1) instead of a
    clean stop (exit 130). Held back, the signal lands just after, before the write.

    Python runs a handler in the main thread whichever thread the OS gave the signal to,
    so a mask on this thread alone does not hold it once another thread lives (a worker's
    lease renewer): the OS hands the signal to that thread and the handler still runs
    here, mid-serialisation. So the handlers are swapped for one that notes the signal,
    and what was noted is raised again once the old handlers are back."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers run only in the main thread: none can interrupt this one
        return
    arrived: list[int] = []

    def note(signum: int, frame: object) -> None:
        arrived.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        for noted in dict.fromkeys(arrived):
            signal.raise_signal(noted)


def utcnow() -> datetime:
    return datetime.now(UTC)
