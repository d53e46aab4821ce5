"""Resume a stopped run (``orchestrator resume RUN [--from-stage S]``): after a person fixed
what stopped it — installed a program, cleared the caps, set ``DRY_RUN=false`` — the run
goes on from the stage that stopped it, and the stages that finished are not run again
(nor paid for again).

Which runs: a ``needs-human`` or ``failed`` run, the ticket's latest (``lifecycle.RESUMES``;
never ``completed``, ``split`` or one a person rejected). A run that has not stopped is
simply driven on, as ``orchestrator run`` would. ``--from-stage`` goes on from another
stage: that stage and every one after it run again; every stage before it must have
completed.

The resume is a person's decision about the run, so it is recorded twice before anything
runs: a ledger row (source ``human``: who, from which state and halt, from which stage),
keyed by the run and the resume's number so a resume cut short and asked again appends
no second row; then the run record's ``resumes`` entry with the new state.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.app.driver import continue_run
from orchestrator.app.services import Services
from orchestrator.domain.errors import IllegalTransition, UsageError
from orchestrator.domain.lifecycle import (
    HaltReason,
    RunState,
    check_resume,
    dry_run_armed,
    is_terminal,
)
from orchestrator.domain.runs import RunRecord, StageStatus, resumed
from orchestrator.storage import CrashPoint, ticket_lock
from orchestrator.storage.ledger import Ledger, person_decision

CAPABILITY = "resume-run"


class ResumeRefused(UsageError):
    """This run cannot be resumed (as asked); the message says why and what to do."""


@dataclass(frozen=True)
class ResumePlan:
    """Where a resume goes on from. ``stage`` None: the run has not stopped; it is driven
    on as it stands."""

    stage: str | None


def plan_resume(record: RunRecord, from_stage: str | None, *, dry_run: bool) -> ResumePlan:
    """Where ``record`` would go on from, or ResumeRefused saying why not. Pure."""
    names = [s.name for s in record.stages]
    if record.state is RunState.AWAITING_APPROVAL:
        raise ResumeRefused(
            f"resume refused: run {record.run_id} is waiting for an answer: "
            f"`orchestrator approve {record.run_id}` or `orchestrator reject {record.run_id}`"
        )
    if not is_terminal(record.state):
        if from_stage is not None:
            raise ResumeRefused(
                f"resume refused: run {record.run_id} is {record.state}, not stopped: it goes on "
                "where it is (resume it without --from-stage)"
            )
        return ResumePlan(None)
    try:
        check_resume(record.state, record.halt.reason if record.halt else None)
    except IllegalTransition as exc:
        raise ResumeRefused(f"resume refused: run {record.run_id}: {exc}") from None
    unfinished = [s.name for s in record.stages if s.status is not StageStatus.COMPLETED]
    if from_stage is None:
        if not unfinished:
            raise ResumeRefused(f"resume refused: run {record.run_id} has no stage left to run")
        stage = unfinished[0]
    elif from_stage not in names:
        raise ResumeRefused(
            f"resume refused: run {record.run_id} has no stage {from_stage!r} "
            f"(its stages: {', '.join(names)})"
        )
    else:
        stage = from_stage
        before = names[: names.index(stage)]
        skipped = [name for name in before if name in unfinished]
        if skipped:
            raise ResumeRefused(
                f"resume refused: stage {skipped[0]!r} comes before {stage!r} and has not "
                f"completed; resume from {skipped[0]!r} or earlier"
            )
    halt = record.halt
    if halt is not None and halt.reason is HaltReason.DRY_RUN_BLOCK and dry_run:
        raise ResumeRefused(
            f"resume refused: run {record.run_id} stopped because DRY_RUN is armed, and it "
            "still is: set DRY_RUN=false in the environment to let side-effectful stages run"
        )
    return ResumePlan(stage)


def resume_decision_id(run_id: str, number: int) -> str:
    return f"{run_id}:resume-{number}"


def resume_run(
    services: Services, ledger: Ledger, run_id: str, *, by: str, from_stage: str | None
) -> RunRecord:
    """Resume ``run_id`` (see the module docstring) and drive it. Holds the ticket's lock
    throughout: a ticket another process is running is refused (TicketLocked)."""
    store = services.storage.runs
    record = store.load(run_id)
    with ticket_lock(store.state_dir, record.ticket_id):
        record = store.load(run_id)  # as it is now that nobody else can change it
        latest = store.latest_for_ticket(record.ticket_id)
        if latest is not None and latest.run_id != record.run_id:
            raise ResumeRefused(
                f"resume refused: run {run_id} is not {record.ticket_id}'s latest run "
                f"({latest.run_id} is); resume that one"
            )
        configured = [s.name for s in services.loaded.config.stages]
        if configured != [s.name for s in record.stages]:
            # Checked before anything is recorded: a resume that cannot run changes nothing.
            raise ResumeRefused(
                f"resume refused: run {run_id} was started with stages "
                f"{[s.name for s in record.stages]}, but {services.loaded.path} now defines "
                f"{configured}; restore that config to resume it"
            )
        plan = plan_resume(record, from_stage, dry_run=dry_run_armed(services.environ))
        if plan.stage is not None:
            record = _record_resume(record, plan.stage, ledger, services, by=by)
        return continue_run(record, services)


def _record_resume(
    record: RunRecord, stage: str, ledger: Ledger, services: Services, *, by: str
) -> RunRecord:
    """The ledger row, then the run record: both before anything of the run runs again."""
    now = services.clock()
    decision_id = resume_decision_id(record.run_id, len(record.resumes) + 1)
    if not any(r.get("kind") == "decision" for r in ledger.rows_of(decision_id)):
        halt = record.halt
        ledger.append(
            person_decision(
                decision_id=decision_id,
                ticket=record.ticket_id,
                run=record.run_id,
                capability=CAPABILITY,
                inputs=record.model_dump(mode="json"),
                decision={
                    "action": CAPABILITY,
                    "by": by,
                    "from_state": str(record.state),
                    "halt": str(halt.reason) if halt else None,
                    "stage": stage,
                },
                at=now,
            )
        )
    record = resumed(record, at=now, by=by, stage=stage)
    services.storage.runs.save(record, CrashPoint.RESUMED)
    services.reporter.note(f"resumed by {by} at stage {stage!r}")
    return record
