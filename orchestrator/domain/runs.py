"""A run's record and its transitions: what a run is (attempts, stages, checks, halts,
resumes, verdict references), checked against the lifecycle's transition table. Pure: the
run store (``orchestrator/storage/runs.py``) reads and writes it.

Free text that came from a stage or an engine is redacted whenever a record is built or
read (``StageText``), so a record never holds a secret, however it was made.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field

from orchestrator.domain import errors
from orchestrator.domain.engine_files import LISTED_PATHS
from orchestrator.domain.lifecycle import HaltReason, RunState, check_resume, check_transition
from orchestrator.domain.validation import Frozen, named
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from orchestrator.domain.config import Config, StageConfig


SCHEMA_VERSION: Literal[1] = 1


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)


# Text that came from a stage or an engine: redacted whenever a record is built, revised
# (``Frozen.revised``) or read — the one place a record's text is redacted — so a file
# written before redaction happened at the source prints no secret either (``show
# --json``, the verdict file). Redaction is idempotent: reading twice changes nothing.
StageText = Annotated[str | None, AfterValidator(_redacted)]
# What an engine said at its end, redacted and then cut (the cut keeps the record small;
# cutting first could leave half a secret the pass no longer recognises).
ENGINE_WORDS_CHARS = 2000
EngineWords = Annotated[
    str | None, AfterValidator(lambda text: (_redacted(text) or "")[:ENGINE_WORDS_CHARS] or None)
]


# Paths the engine's work touched, named by it: each made text (a name that is not UTF-8
# has its odd bytes replaced), redacted, then cut; at most LISTED_PATHS of them.
LISTED_PATH_CHARS = 300


def _listed_path(name: str) -> str:
    try:
        text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = name.encode("utf-8", "replace").decode("utf-8")
    return redact(text)[:LISTED_PATH_CHARS]


ListedPaths = Annotated[
    tuple[Annotated[str, AfterValidator(_listed_path)], ...],
    AfterValidator(lambda paths: paths[:LISTED_PATHS]),
]


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
    # N when it was killed by signal N (its exit code is then 128+N), as on an ``Attempt``.
    signal: int | None = None
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
    # It failed, but only as it already fails on the base commit (``on_red_base =
    # "compare"``): judged passed, its exit code kept as it was.
    already_on_base: bool = False
    # What the egress proxy refused it, as on an ``Attempt``.
    egress_denied: tuple[Annotated[str, AfterValidator(redact)], ...] = ()
    egress_denials: Annotated[int, Field(ge=0)] = 0

    @property
    def passed(self) -> bool:
        return self.skipped or self.already_on_base or (self.exit_code == 0 and not self.timed_out)


class FailingCheck(Frozen):
    name: str
    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    log_path: str | None
    signal: int | None = None


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
    # True: ``cost_usd`` is ours, estimated from the tokens and ``[prices]`` (the engine
    # said none); False: the engine's own figure, or no cost at all.
    cost_estimated: bool = False
    input_tokens: Annotated[int, Field(ge=0)] | None = None
    output_tokens: Annotated[int, Field(ge=0)] | None = None
    cache_read_tokens: Annotated[int, Field(ge=0)] | None = None
    cache_write_tokens: Annotated[int, Field(ge=0)] | None = None
    # What the engine's commit holds, as git names the paths, and what was left out of it
    # as the engine's own (its chat history and caches; an ignore file committed without
    # the engine's lines is in both): at most LISTED_PATHS each, redacted and cut; the
    # counts say how many in all. None: no commit step ran (a failed attempt, ``patch``,
    # an older record).
    committed_paths: ListedPaths | None = None
    committed_count: Annotated[int, Field(ge=0)] | None = None
    left_out_paths: ListedPaths = ()
    left_out_count: Annotated[int, Field(ge=0)] = 0
    final_message: EngineWords = None
    failure_class: str | None = None
    failure_detail: StageText = None
    # "bwrap", or "none" when its config opted it out (a check stage: per check, on
    # each CheckResult). Absent from records written before every stage was sandboxed.
    sandbox: str | None = None
    # Its network (domain/egress.py): "none", "proxy" (only its allow-list's hosts, through
    # the egress proxy) or "open" (egress = ["*"]: the whole network, warned at start).
    # Absent: unsandboxed, a check stage, or a record from before the proxy.
    egress: str | None = None
    # What the proxy refused it: distinct ``host:port`` (first refused first, at most 32;
    # text the sandbox sent, so redacted) and how many refusals in all.
    egress_denied: tuple[Annotated[str, AfterValidator(redact)], ...] = ()
    egress_denials: Annotated[int, Field(ge=0)] = 0

    @property
    def ok(self) -> bool:
        return (
            self.status is AttemptStatus.FINISHED
            and self.exit_code == 0
            and not self.timed_out
            and self.failure_class is None
        )

    @property
    def failed_log(self) -> Path | None:
        """The log that says why it failed: its failing check's, else its own."""
        log = self.failing_check.log_path if self.failing_check is not None else self.log_path
        return Path(log) if log else None


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
    # The model provider's outage failed its call (issue 43): the run waited, the failure
    # is decided again by a later run, and its diagnosis does not count against the cap.
    model_unavailable: bool = False
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


class Reclone(Frozen):
    """The run went on where its clone was not (issue 30: a fleet worker shares no disk
    with the one that started the run, or someone removed the clone) while a stage still
    to run, or a decision about a failure, works in it: every stage runs again from the
    first, which makes a new clone. Attempts, verdicts and counters are kept; a failure
    up to ``after_attempt`` is not decided on (nor a decision about it carried out)."""

    at: datetime
    clone_dir: str
    needed_by: str  # the stage that works in the clone, or the failed stage a decision was about
    from_state: RunState
    from_stage: str  # the first stage: where the run goes on from
    after_attempt: int  # the last attempt before the clone was found missing (0: none)

    def note(self) -> str:
        """What the terminal is told."""
        return (
            f"workspace not on this machine: the clone {self.clone_dir} is missing and "
            f"{self.needed_by!r} works in it; stages re-run from {self.from_stage!r}"
        )


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
    # The commit the clone started at, once the review checks were run there (base check).
    base_commit: str | None = None
    # Stage → the verdict whose failure that stage's next attempts are told about (its
    # prompt's "previous attempt" section): set when a re-run after a code failure is
    # carried out; absent from records written before there was feedback.
    feedback: dict[str, int] = Field(default_factory=dict)
    # The times the run went on from its first stage because its clone was not there
    # (``recloned``); absent from records written before a fleet shared no disk.
    reclones: tuple[Reclone, ...] = ()

    def stage_status(self, name: str) -> StageStatus:
        return named(self.stages, name).status

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

    def halted(
        self, target: RunState, *, reason: HaltReason, stage: str | None, detail: str, now: datetime
    ) -> RunRecord:
        """Stopped at ``stage`` (``target``: failed, or needs-human), the halt saying why."""
        halt = Halt(reason=reason, stage=stage, detail=detail)
        return self.transition(target, now=now, halt=halt, stage=stage)


def pending_verdict(record: RunRecord) -> VerdictRef | None:
    """The decision a run in awaiting-approval is waiting on."""
    return next((v for v in reversed(record.verdicts) if v.outcome is None), None)


def decision_taken(record: RunRecord) -> bool:
    """A decision about the run's last failure is taken (answered or being carried out):
    it is carried out before the clone is made again, not dropped by the re-run."""
    failed = record.last_failed_attempt()
    if record.state not in (RunState.RECOVERING, RunState.AWAITING_APPROVAL) or failed is None:
        return False
    return any(v.attempt == failed.number and not v.model_unavailable for v in record.verdicts)


def interrupted(record: RunRecord, *, at: datetime) -> RunRecord:
    """``record`` with the attempts still marked running (their orchestrator died)
    interrupted at ``at``, and their stages pending again."""
    for attempt in record.attempts:
        if attempt.status is AttemptStatus.RUNNING:
            ended = attempt.model_copy(update={"status": AttemptStatus.INTERRUPTED, "ended_at": at})
            record = record.with_attempt(ended).with_stage_status(
                attempt.stage, StageStatus.PENDING
            )
    return record


def attempt_started(
    record: RunRecord, stage: str, *, engine: str, model: str, sandbox: str | None,
    egress: str | None, at: datetime,
) -> tuple[RunRecord, Attempt]:  # fmt: skip
    """``record`` with its next attempt, of ``stage``, begun ``at`` (counted; the stage
    running and current), and that attempt: persisted before anything of it runs."""
    number = record.counters.attempts + 1
    attempt = Attempt(
        number=number, stage=stage, status=AttemptStatus.RUNNING, engine=engine or None,
        model=model or None, started_at=at, sandbox=sandbox, egress=egress,
    )  # fmt: skip
    counters = record.counters.model_copy(update={"attempts": number})
    update = {"counters": counters, "current_stage": stage, "updated_at": at}
    started = record.with_attempt(attempt).with_stage_status(stage, StageStatus.RUNNING)
    return started.model_copy(update=update), attempt


def attempt_finished(
    record: RunRecord, attempt: Attempt, *, pull_request: str | None, at: datetime
) -> RunRecord:
    """``record`` with ``attempt`` ended ``at``: its stage completed, or failed; the pull
    request a side-effectful stage opened, if it opened one."""
    status = StageStatus.COMPLETED if attempt.ok else StageStatus.FAILED
    opened = {"pull_request": pull_request} if pull_request is not None else {}
    ended = record.with_attempt(attempt).with_stage_status(attempt.stage, status)
    return ended.model_copy(update={**opened, "updated_at": at})


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


def next_stage(record: RunRecord, stages: Sequence[StageConfig]) -> StageConfig | None:
    """The first of ``stages`` the run has not completed; None: every one is."""
    return next(
        (s for s in stages if record.stage_status(s.name) is not StageStatus.COMPLETED), None
    )


def moved_elsewhere(
    record: RunRecord, stages: Sequence[StageConfig], *, at: datetime, clone_there: bool
) -> RunRecord | None:
    """``record`` going on where its clone is not (``clone_there`` false) while the next
    stage, or a decision about a failure, works in it (``clone_needed_by``): ``recloned``.
    None when the clone is there, or not needed yet."""
    needed_by = clone_needed_by(record, stages)
    if needed_by is None or clone_there:
        return None
    return recloned(record, at=at, needed_by=needed_by)


def clone_needed_by(record: RunRecord, stages: Sequence[StageConfig]) -> str | None:
    """The stage that needs the run's clone next, if any: a stage still to run that works
    in it (``cwd = "clone"``), or the failed stage a decision still to be taken or carried
    out is about (recovery reads and changes the clone). None when the next stage comes
    before every stage in the clone (it will make the clone), when no stage works in the
    clone, or when the first stage does (nothing in the pipeline makes it, so running
    again from the first cannot help). Pure: whether the clone exists is the caller's."""
    names = [s.name for s in stages]
    in_clone = [i for i, s in enumerate(stages) if s.cwd == "clone"]
    if not in_clone or in_clone[0] == 0:
        return None
    first_in_clone = in_clone[0]
    failed = _failure_to_decide_on(record)
    if failed is not None and failed.stage in names and names.index(failed.stage) >= first_in_clone:
        return failed.stage
    for index, stage in enumerate(stages):
        if record.stage_status(stage.name) is not StageStatus.COMPLETED:
            return stage.name if index >= first_in_clone else None
    return None


def _failure_to_decide_on(record: RunRecord) -> Attempt | None:
    """The failed attempt a decision is still owed or being carried out for: the run is
    recovering or awaiting an answer, or it recorded a failure and no verdict about it."""
    if record.state not in (RunState.RECOVERING, RunState.AWAITING_APPROVAL):
        return undecided_failure(record)
    failed = record.last_failed_attempt()
    if failed is None or any(r.after_attempt >= failed.number for r in record.reclones):
        return None
    return failed


def undecided_failure(record: RunRecord) -> Attempt | None:
    """The run's last attempt, if it finished failed and no decision was taken about it
    (the orchestrator died in between), and the run did not go on from its first stage
    since (its clone was not there: ``recloned``)."""
    last = record.attempts[-1] if record.attempts else None
    if last is None or last.status is not AttemptStatus.FINISHED or last.ok:
        return None
    if any(v.attempt == last.number and not v.model_unavailable for v in record.verdicts):
        return None
    if any(r.after_attempt >= last.number for r in record.reclones):
        return None
    return last


def recloned(record: RunRecord, *, at: datetime, needed_by: str) -> RunRecord:
    """``record`` set to go on from its first stage, which makes a new clone: every stage
    pending again, the run ``running`` (a decision it was recovering or awaiting an answer
    for is left as recorded, not carried out), the ``Reclone`` entry added. Attempts,
    verdicts, counters and overrides are kept."""
    first = record.stages[0].name
    entry = Reclone(
        at=at,
        clone_dir=record.clone_dir,
        needed_by=needed_by,
        from_state=record.state,
        from_stage=first,
        after_attempt=record.attempts[-1].number if record.attempts else 0,
    )
    moved = record
    if moved.state is RunState.AWAITING_APPROVAL:
        moved = moved.transition(RunState.RECOVERING, now=at)
    if moved.state is not RunState.RUNNING:
        moved = moved.transition(RunState.RUNNING, now=at, stage=first)
    return moved.reset_stages_from(first).model_copy(
        update={"updated_at": at, "current_stage": first, "reclones": (*record.reclones, entry)}
    )


def new_run_id(ticket_id: str, now: datetime) -> str:
    """Sortable by time, unique across processes: ``CARDS-1-20261130T014500Z-3fa2``."""
    return f"{ticket_id}-{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def engine_and_model(record: RunRecord, stage: StageConfig, config: Config) -> tuple[str, str]:
    """The engine and model the next attempt of ``stage`` uses: a verdict's override if
    there is one, else the stage's configuration (model default: the ladder's first)."""
    override = record.overrides.get(stage.name)
    if override is not None:
        return override.engine, override.model or ""
    if stage.engine is None:
        return "", ""
    ladder = config.engines[stage.engine].models
    return stage.engine, stage.model or (ladder[0] if ladder else "")


EXIT_FOR_STATE: Mapping[RunState, int] = {
    RunState.COMPLETED: errors.EXIT_COMPLETED,
    RunState.NEEDS_HUMAN: errors.EXIT_NEEDS_HUMAN,
    RunState.FAILED: errors.EXIT_FAILED,
    RunState.SPLIT: errors.EXIT_SPLIT,
    RunState.AWAITING_APPROVAL: errors.EXIT_AWAITING_APPROVAL,
    RunState.WAITING_INFRA: errors.EXIT_LOCKED,  # an outage outlasted the back-off: later
}


def exit_code(record: RunRecord) -> int:
    """What ``run``, ``resume`` and ``approve`` exit with for the run as it stands."""
    return EXIT_FOR_STATE.get(record.state, errors.EXIT_BUG)
