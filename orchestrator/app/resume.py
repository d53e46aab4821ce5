"""Resume a stopped run (``orchestrator resume RUN [--from-stage S]``): after a person fixed
what stopped it — installed a program, cleared the caps, set ``DRY_RUN=false`` — the run
goes on from the stage that stopped it, and the stages that finished are not run again
(nor paid for again).

Which runs: a ``needs-human`` or ``failed`` run, the ticket's latest (``lifecycle.RESUMES``;
never ``completed``, ``split`` or one a person rejected). A run that has not stopped is
simply driven on, as ``orchestrator run`` would — one awaiting approval only once its
decision is answered (``approve`` records the answer; this carries it out here). ``--from-stage``
goes on from another stage: that stage and every one after it run again; every stage
before it must have completed. A run whose clone is gone (``prune`` keeps a resumable
run's clone, but a person may have removed it) is refused before anything is recorded,
naming ``--from-stage`` of the stage that makes the clone: going on in no clone would only
fail, and re-cloning by itself would silently redo the work the later stages did.

A batch (``resume_dry_run_block``) takes one more way on, by itself: a run DRY_RUN stopped
is resumed from the blocked stage by the first batch whose environment has
``DRY_RUN=false``, recorded like a person's resume (by ``batch``); under the ticket's lock,
so overlapping batches resume it once.

The resume is a person's decision about the run, so it is recorded twice before anything
runs: a ledger row (source ``human``: who, from which state and halt, from which stage),
keyed by the run and the resume's number so a resume cut short and asked again appends
no second row; then the run record's ``resumes`` entry with the new state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.app.driver import continue_run
from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.domain.config import StageConfig
from orchestrator.domain.errors import IllegalTransition, UsageError
from orchestrator.domain.lifecycle import (
    HaltReason,
    RunState,
    check_resume,
    dry_run_armed,
    is_terminal,
)
from orchestrator.domain.runs import RunRecord, StageStatus, pending_verdict, resumed
from orchestrator.storage import CrashPoint, DecisionLedger
from orchestrator.storage.ledger import key_from_env, person_decision

CAPABILITY = "resume-run"


class ResumeRefused(UsageError):
    """This run cannot be resumed (as asked); the message says why and what to do."""


@dataclass(frozen=True)
class ResumePlan:
    """Where a resume goes on from. ``stage`` None: the run has not stopped; it is driven
    on as it stands."""

    stage: str | None


def plan_resume(
    record: RunRecord, from_stage: str | None, *, dry_run: bool, answered: bool = False
) -> ResumePlan:
    """Where ``record`` would go on from, or ResumeRefused saying why not. ``answered``:
    the decision an awaiting-approval run waits on has its answer. Pure."""
    names = [s.name for s in record.stages]
    if record.state is RunState.AWAITING_APPROVAL and not answered:
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
            "still is in this environment (the one that would run the stage): set "
            f"DRY_RUN=false here (`DRY_RUN=false orchestrator resume {record.run_id}`), or "
            "let the next `DRY_RUN=false orchestrator batch` continue it"
        )
    return ResumePlan(stage)


def clone_needed_but_gone(
    record: RunRecord, stage: str, stages: tuple[StageConfig, ...] | list[StageConfig]
) -> str | None:
    """Why going on from ``stage`` cannot work: the stages from it on work in the run's
    clone, which is gone, and an earlier stage is the one that makes it. None when the
    clone is there, or when ``stage`` itself comes before any stage that works in it."""
    names = [s.name for s in stages]
    in_clone = [i for i, s in enumerate(stages) if s.cwd == "clone"]
    clone = Path(record.clone_dir)
    if not in_clone or names.index(stage) < in_clone[0] or os.path.lexists(clone):
        return None
    makes = names[0]
    return (
        f"resume refused: run {record.run_id}'s clone {clone} is gone (pruned, or removed), "
        f"and stage {stage!r} works in it; `orchestrator resume {record.run_id} "
        f"--from-stage {makes}` makes it again and runs every stage after {makes!r} again"
    )


def resume_decision_id(run_id: str, number: int) -> str:
    return f"{run_id}:resume-{number}"


def resume_run(
    services: Services,
    ledger: DecisionLedger,
    run_id: str,
    *,
    by: str,
    from_stage: str | None,
    drive: bool = True,
) -> RunRecord:
    """Resume ``run_id`` (see the module docstring) and drive it; with ``drive`` False,
    only record the resume (a fleet worker drives it). Holds the ticket's lock
    throughout: a ticket another process is running is refused (TicketLocked)."""
    store = services.storage.runs
    record = store.load(run_id)
    with services.storage.locks.ticket(record.ticket_id):
        record = store.load(run_id)  # as it is now that nobody else can change it
        latest = store.latest_for_ticket(record.ticket_id)
        if latest is not None and latest.run_id != record.run_id:
            raise ResumeRefused(
                f"resume refused: run {run_id} is not {record.ticket_id}'s latest run "
                f"({latest.run_id} is); resume that one"
            )
        return _resume_locked(services, ledger, record, by=by, from_stage=from_stage, drive=drive)


def _resume_locked(
    services: Services,
    ledger: DecisionLedger,
    record: RunRecord,
    *,
    by: str,
    from_stage: str | None,
    drive: bool = True,
) -> RunRecord:
    """Plan, record and (``drive``) drive a resume of ``record``, the ticket's latest
    run, whose ticket's lock the caller holds."""
    configured = [s.name for s in services.loaded.config.stages]
    if configured != [s.name for s in record.stages]:
        # Checked before anything is recorded: a resume that cannot run changes nothing.
        raise ResumeRefused(
            f"resume refused: run {record.run_id} was started with stages "
            f"{[s.name for s in record.stages]}, but {services.loaded.path} now defines "
            f"{configured}; restore that config to resume it"
        )
    plan = plan_resume(
        record,
        from_stage,
        dry_run=dry_run_armed(services.environ),
        answered=_answered(record, services),
    )
    if plan.stage is not None:
        gone = clone_needed_but_gone(record, plan.stage, services.loaded.config.stages)
        if gone is not None:
            raise ResumeRefused(gone)
        record = _record_resume(record, plan.stage, ledger, services, by=by)
    return continue_run(record, services) if drive else record


def _answered(record: RunRecord, services: Services) -> bool:
    ref = pending_verdict(record)
    if record.state is not RunState.AWAITING_APPROVAL or ref is None:
        return False
    return approvals_of(services).answered(record.run_id, ref.number)


def dry_run_blocked(record: RunRecord) -> bool:
    """The run ended ``needs-human`` only because DRY_RUN stopped a side-effectful stage:
    a batch whose environment lets that stage run continues it."""
    halt = record.halt
    return (
        record.state is RunState.NEEDS_HUMAN
        and halt is not None
        and halt.reason is HaltReason.DRY_RUN_BLOCK
    )


BATCH_BY = "batch"


def resume_dry_run_block(services: Services, run_id: str) -> tuple[RunRecord, bool]:
    """A batch's way on for a run DRY_RUN stopped: when DRY_RUN is not armed in
    ``services.environ`` and the run is still its ticket's latest and still stopped so,
    it is resumed from the blocked stage (recorded as ``resume`` records it, by ``batch``)
    and driven. Returns the run and whether this call drove it; a run another batch
    resumed meanwhile, or one DRY_RUN still holds here, is returned as found. Raises
    TicketLocked while another process drives the ticket, ResumeRefused when its clone
    is gone."""
    store = services.storage.runs
    found = store.load(run_id)
    with services.storage.locks.ticket(found.ticket_id):
        latest = store.latest_for_ticket(found.ticket_id) or found
        if (
            latest.run_id != run_id
            or not dry_run_blocked(latest)
            or dry_run_armed(services.environ)
        ):
            return latest, False
        ledger = services.storage.ledger(key_from_env(services.environ))
        return _resume_locked(services, ledger, latest, by=BATCH_BY, from_stage=None), True


def _record_resume(
    record: RunRecord, stage: str, ledger: DecisionLedger, services: Services, *, by: str
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
