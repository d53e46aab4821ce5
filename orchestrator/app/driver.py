"""Run one ticket: open (or resume) its run, drive the stages in order, persist after
every step. ``run_ticket`` is a plain function of on-disk inputs and injected services,
so a queue worker can call it as it is.

Resuming: a run that is not terminal is picked up where it stopped. Completed stages are
never re-run. An attempt that was running when the orchestrator died is marked
``interrupted`` and its process group (if it outlived us) is killed before the stage
starts again. An attempt recorded as failed before the orchestrator died is decided on,
as it would have been, not re-run unasked. Every write on the way is a named crash point
(``storage.crash_points``); the kill matrix proves the next run goes on from each.

A run may go on where its clone is not: a fleet worker shares no disk with the one that
started it (issue 30). When the next stage, or a decision about a failure, works in the
clone and it is missing, every stage runs again from the first, which makes a new clone
(``moved_elsewhere``; recorded on the run, ``reclones``). Attempts, verdicts and
charges are kept. A person's ``resume`` of a stopped run whose clone is gone (pruned)
is refused before this, naming ``--from-stage`` of the first stage.

A clone is checked before anything of ours works in it again — each stage that runs in
it, each decision about a failure (``_halt_if_untrusted``): a ``.git`` that is not the
clone's own directory, or a config that says what only an attacker would, stops the run
``needs-human`` (``precondition_failed``) before any git call, model or recipe.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from orchestrator.actions.budget import back_off_owed, charge_key
from orchestrator.app.base_check import base_check_due, check_the_base
from orchestrator.app.learning import learn
from orchestrator.app.recover import recover
from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.domain.config import LoadedConfig, StageConfig
from orchestrator.domain.errors import StateError, TicketError
from orchestrator.domain.forge_hosts import origin_problem
from orchestrator.domain.infra_wait import infra_window_start, left_waiting, wait_ran_out
from orchestrator.domain.lifecycle import (
    HaltReason,
    RunState,
    dry_run_armed,
    dry_run_block_detail,
    halt_reason_for_failure,
    is_terminal,
)
from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    RunRecord,
    StageRecord,
    StageStatus,
    decision_taken,
    interrupted,
    moved_elsewhere,
    new_run_id,
    next_stage,
    pending_verdict,
    undecided_failure,
)
from orchestrator.domain.tickets import Ticket, id_taken_elsewhere, load_ticket
from orchestrator.execution import runner
from orchestrator.execution.attempts import run_stage
from orchestrator.execution.git import clone_git_dir_problem, config_problem
from orchestrator.execution.stage_env import attempt_marker, work_branch
from orchestrator.reading.error_lines import last_error_line_of
from orchestrator.storage import CrashPoint

__all__ = ["Services", "continue_run", "describe_failure", "run_ticket"]


def run_ticket(ticket: Ticket, services: Services, *, rerun: bool = False) -> RunRecord:
    """Drive ``ticket`` to a terminal state (or until interrupted) and return its record.

    Holds the ticket's lock throughout; raises TicketLocked if another process has it.
    A ticket whose latest run completed is not run again unless ``rerun``.
    """
    return _run(ticket, services, rerun=rerun, unfinished_only=False)[0]


def run_unfinished(ticket: Ticket, services: Services) -> tuple[RunRecord, bool]:
    """The batch's way in: no terminal run starts a new one either, and it says whether
    this call drove the run (False: its latest run had already ended, perhaps in another
    batch a moment ago). Both are decided under the ticket's lock, so a second batch
    never repeats a ticket another just ended, nor reports it as its own."""
    return _run(ticket, services, rerun=False, unfinished_only=True)


def _run(
    ticket: Ticket, services: Services, *, rerun: bool, unfinished_only: bool
) -> tuple[RunRecord, bool]:
    with services.storage.locks.ticket(ticket.id):
        latest = services.storage.runs.latest_for_ticket(ticket.id)
        _refuse_a_second_file(ticket, latest)
        _refuse_a_forge_not_configured(ticket, services)
        if unfinished_only and latest is not None and is_terminal(latest.state):
            return latest, False
        record, resumed = _open_run(ticket, latest, services, rerun=rerun)
        services.reporter.run_opened(record, resumed=resumed)
        if is_terminal(record.state):
            return record, False
        return _drive_and_tell(record, services), True


def _refuse_a_second_file(ticket: Ticket, latest: RunRecord | None) -> None:
    """Raise TicketError when another existing file claims this ticket's id (the file
    its latest run started from): which of the two is meant is a person's call."""
    # ``approve`` continues a run from the run's own snapshot of its ticket.
    if latest is not None and Path(latest.ticket_snapshot).resolve() != ticket.path:
        clash = id_taken_elsewhere(ticket, latest.ticket_path)
        if clash is not None:
            raise clash


def _refuse_a_forge_not_configured(ticket: Ticket, services: Services) -> None:
    """Raise TicketError when the ticket's ``[origin]`` names a forge, an API or a
    repository the config does not (``domain/forge_hosts``, issue 40): the open-pr stage
    would send the forge token there. Before any run is opened or stage started."""
    problem = origin_problem(ticket, services.loaded.config.sources, services.environ)
    if problem is not None:
        raise TicketError(f"ticket error: {problem}; nothing was run")


def continue_run(record: RunRecord, services: Services) -> RunRecord:
    """Drive an open run whose ticket's lock the caller holds (``orchestrator resume``)."""
    _require_same_stages(record, services.loaded)
    snapshot = Path(record.ticket_snapshot)
    if snapshot.is_file():  # the config may have changed since the run was opened
        _refuse_a_forge_not_configured(load_ticket(snapshot), services)
    services.reporter.run_opened(record, resumed=True)
    return _drive_and_tell(record, services)


def _drive_and_tell(record: RunRecord, services: Services) -> RunRecord:
    """Drive the run, and tell whoever is to be told where it got to: the terminal, the
    issue's status comment (before and after), the notification targets. Each telling is
    bounded and never raises."""
    services.status.show(record, services.reporter.note)
    record = _drive(record, services)
    # An outage already older than the configured age is not waited on again.
    stopped = wait_ran_out(record, services.loaded, now=services.clock())
    if stopped is not None:
        record = stopped
        services.storage.runs.save(record, CrashPoint.RUN_ENDED)
    services.reporter.run_finished(record)
    services.notifier.after_run(record)
    services.status.show(record, services.reporter.note)
    return record


def _open_run(
    ticket: Ticket, latest: RunRecord | None, services: Services, *, rerun: bool
) -> tuple[RunRecord, bool]:
    if latest is not None and not is_terminal(latest.state):
        _require_same_stages(latest, services.loaded)
        return latest, True
    if latest is not None and latest.state is RunState.COMPLETED and not rerun:
        return latest, False
    return _create_run(ticket, services), False


def _require_same_stages(record: RunRecord, loaded: LoadedConfig) -> None:
    configured = [s.name for s in loaded.config.stages]
    recorded = [s.name for s in record.stages]
    if configured != recorded:
        raise StateError(
            f"state error: run {record.run_id} was started with stages {recorded}, but "
            f"{loaded.path} now defines {configured}; restore that config to resume it, "
            "or start a new run with --rerun"
        )


def _snapshot_ticket(ticket: Ticket, dest: Path) -> Path:
    """Copy the ticket and the files it refers to, keeping their relative layout, so the
    run's inputs stay on disk with the run whatever happens to the originals."""
    source_dir = ticket.path.parent
    dest.mkdir(parents=True, exist_ok=True)
    for path in [ticket.path, *ticket.extra_files()]:
        target = dest / path.relative_to(source_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return dest / ticket.path.name


def _create_run(ticket: Ticket, services: Services) -> RunRecord:
    # Refused before anything is written: a run that can only fail in its clone stage
    # would hide the reason in a log and leave a run to clean up.
    refusal = ticket.refused_repository()
    if refusal is not None:
        raise refusal
    now = services.clock()
    store = services.storage.runs
    run_id = new_run_id(ticket.id, now)
    run_dir = store.run_dir(run_id)
    snapshot = _snapshot_ticket(ticket, store.layout.ticket_snapshot_dir(run_id))
    record = RunRecord(
        run_id=run_id,
        ticket_id=ticket.id,
        ticket_title=ticket.fields.title,
        ticket_kind=ticket.fields.kind.value,
        ticket_path=str(ticket.path),
        ticket_snapshot=str(snapshot),
        ticket_sha256=ticket.sha256,
        repository=ticket.repository_location(),
        base_branch=ticket.fields.base_branch,
        work_branch=work_branch(ticket.id),
        config_path=str(services.loaded.path),
        config_sha256=services.loaded.sha256,
        run_dir=str(run_dir),
        clone_dir=str(store.layout.clone_dir(run_id)),
        created_at=now,
        updated_at=now,
        stages=tuple(StageRecord(name=s.name) for s in services.loaded.config.stages),
    )
    store.save(record, CrashPoint.RUN_CREATED)
    return record


def _take_up(record: RunRecord, services: Services) -> tuple[RunRecord, bool]:
    """Take the run up where it stopped; False when it goes no further now. Attempts
    still marked running belong to a dead orchestrator: what they left behind is killed,
    they are marked interrupted and their stage goes back to pending. A pending run
    starts; a run that waited out an outage (``waiting-infra``) goes on from the stage
    that failed with a fresh round of infrastructure retries (``left_waiting``), or,
    waited too long, stops for a person; one awaiting an answer nobody gave waits on."""
    store = services.storage.runs
    running = [a for a in record.attempts if a.status is AttemptStatus.RUNNING]
    for attempt in running:
        _kill_leftovers(record.run_id, attempt, services)
    if running:  # only a run something was settled in is written again
        record = interrupted(record, at=services.clock())
        store.save(record, CrashPoint.ATTEMPT_INTERRUPTED)
    if record.state is RunState.PENDING:
        record = record.transition(RunState.RUNNING, now=services.clock())
        store.save(record, CrashPoint.RUN_STARTED)
    if record.state is RunState.WAITING_INFRA:
        stopped = wait_ran_out(record, services.loaded, now=services.clock())
        if stopped is not None:
            store.save(stopped, CrashPoint.RUN_ENDED)
            return stopped, False
        record = left_waiting(record, at=services.clock())
        store.save(record, CrashPoint.RESUMED)
        services.reporter.note(
            f"the outage it waited on may be over: going on at stage {record.current_stage!r}"
        )
    ref = pending_verdict(record)
    if record.state is RunState.AWAITING_APPROVAL and (
        ref is None or not approvals_of(services).answered(record.run_id, ref.number)
    ):
        services.reporter.note(
            f"awaiting approval: `orchestrator approve {record.run_id}` or "
            f"`orchestrator reject {record.run_id} --reason ...`"
        )
        return record, False
    # A failure still to decide about is decided on a clone of its own making.
    there = os.path.lexists(record.clone_dir)
    stages, now = services.loaded.config.stages, services.clock()
    moved = (
        None
        if decision_taken(record)
        else moved_elsewhere(record, stages, at=now, clone_there=there)
    )
    if moved is not None:
        record = moved
        store.save(record)
        services.reporter.note(record.reclones[-1].note())
    return record, True


def _kill_leftovers(run_id: str, attempt: Attempt, services: Services) -> None:
    """Kill what a dead orchestrator's ``attempt`` left: its process group and (the group
    may not be recorded, a process may have left it) the attempt's marked processes."""
    if attempt.pgid is not None and runner.kill_stale_group(
        runner.ProcessIdentity(attempt.pgid, attempt.start_ticks)
    ):
        services.reporter.note(f"killed process group {attempt.pgid} left by a dead run")
    leftovers = runner.kill_marked("ORCH_ATTEMPT_ID", attempt_marker(run_id, attempt.number))
    if leftovers:
        services.reporter.note(f"killed {len(leftovers)} process(es) left by a dead run")


def _drive(record: RunRecord, services: Services) -> RunRecord:
    store, config = services.storage.runs, services.loaded.config
    record, going_on = _take_up(record, services)
    if not going_on:
        return record
    if record.state in (RunState.RECOVERING, RunState.AWAITING_APPROVAL):
        # We died while deciding or carrying out a decision, or a person has answered
        # one: finish that first.
        failed = record.last_failed_attempt()
        if failed is None:
            raise StateError(
                f"state error: {store.record_path(record.run_id)}: run {record.run_id} is "
                f"{record.state} but records no failed attempt"
            )
        failing = config.stage(failed.stage)
        record, stop = _recover(record, failing, failed, services)
        if stop:
            return record
    elif record.state is RunState.RUNNING:
        # Stopped during an infrastructure back-off: wait out what is left of it.
        wait_before_retry(owed_back_off(record, services), services)
        failed = undecided_failure(record)
        if failed is not None:
            # We died after recording a failed attempt, before deciding about it: decide
            # now (re-running the stage instead would be a retry nobody decided or paid).
            record, stop = _after_failure(record, config.stage(failed.stage), failed, services)
            if stop:
                return record
    # A decision taken (a person's approval answered, on another machine perhaps) is
    # carried out above before the clone is made again here: its retry or its model
    # override stands, and the stages it re-runs run in the new clone.
    there = os.path.lexists(record.clone_dir)
    moved = moved_elsewhere(record, config.stages, at=services.clock(), clone_there=there)
    if moved is not None:
        record = moved
        store.save(record)
        services.reporter.note(record.reclones[-1].note())
    while (stage := next_stage(record, config.stages)) is not None:
        if stage.side_effectful and dry_run_armed(services.environ):
            record = record.with_stage_status(stage.name, StageStatus.BLOCKED).halted(
                RunState.NEEDS_HUMAN,
                reason=HaltReason.DRY_RUN_BLOCK,
                stage=stage.name,
                detail=dry_run_block_detail(stage.name, record.run_id),
                now=services.clock(),
            )
            store.save(record, CrashPoint.RUN_ENDED)
            return record
        halted = _halt_if_untrusted(record, stage.name, services, clone_made=stage.cwd == "clone")
        if halted is not None:
            return halted
        if base_check_due(record, stage):
            record = check_the_base(record, services)
            if is_terminal(record.state):
                return record
        record, attempt = run_stage(record, stage, services)
        if attempt.ok:
            # A re-run a decision made may have gone green: the playbook learns it (issue 44).
            learn(record, services)
            continue
        record, stop = _after_failure(record, stage, attempt, services)
        if stop:
            return record
    # Whatever a kill between a stage passing and its lesson left unlearned (issue 44).
    learn(record, services)
    record = record.transition(RunState.COMPLETED, now=services.clock())
    store.save(record, CrashPoint.RUN_ENDED)
    return record


def _after_failure(
    record: RunRecord, stage: StageConfig, attempt: Attempt, services: Services
) -> tuple[RunRecord, bool]:
    """Fail the run (recovery off) or recover; True when the run stops here."""
    if not services.loaded.config.recovery.enabled:
        reason = halt_reason_for_failure(
            timed_out=attempt.timed_out, check_stage=stage.is_check_stage
        )
        record = record.halted(
            RunState.FAILED,
            reason=reason,
            stage=stage.name,
            detail=describe_failure(attempt),
            now=services.clock(),
        )
        services.storage.runs.save(record, CrashPoint.RUN_ENDED)
        return record, True
    return _recover(record, stage, attempt, services)


def _recover(
    record: RunRecord, stage: StageConfig, failed: Attempt, services: Services
) -> tuple[RunRecord, bool]:
    """Decide about ``failed`` (or finish the decision taken) in a clone that can be
    trusted, carry it out and wait its back-off; True when the run stops here."""
    halted = _halt_if_untrusted(record, stage.name, services, clone_made=False)
    if halted is not None:
        return halted, True
    # Every way out of recover() is terminal or has charged a bounded retry budget, so
    # the driver's loop ends.
    record, effect = recover(record, stage, failed, services)
    if effect.terminal is not None or effect.paused:
        return record, True
    wait_before_retry(effect.retry_after_s, services)
    return record, False


def _halt_if_untrusted(
    record: RunRecord, stage: str, services: Services, *, clone_made: bool
) -> RunRecord | None:
    """Stop the run ``needs-human`` (``precondition_failed``) when its clone is there and
    may not be used: its ``.git`` is not its own directory (a ``gitdir:`` file or a link
    sends git to another repository), or its own config says what only an attacker would
    (``tampered_config``); None when the run goes on. A stage
    that runs in the clone (``clone_made``) needs all of it, ``.git`` included; a decision
    about a failure is checked only once git has a ``.git`` to go by (a clone that is
    missing, or never made, is the recovery precheck's own case)."""
    clone = Path(record.clone_dir)
    there = clone.exists() if clone_made else os.path.lexists(clone / ".git")
    problem = None
    if there:
        problem = clone_git_dir_problem(clone) or config_problem(
            services.executor, clone, services.environ
        )
    if problem is None:
        return None
    detail = (
        f"the clone {clone} cannot be trusted: {problem}; nothing more ran in it. A "
        f"person must look at it, then `orchestrator resume {record.run_id}`"
    )
    reason = HaltReason.PRECONDITION_FAILED
    now = services.clock()
    record = record.halted(RunState.NEEDS_HUMAN, reason=reason, stage=stage, detail=detail, now=now)
    services.storage.runs.save(record, CrashPoint.RUN_ENDED)
    return record


def wait_before_retry(seconds: float | None, services: Services) -> None:
    """Wait out the back-off an infrastructure retry owes, after its decision and charge
    are persisted. ``services.sleep`` is cut short by SIGINT/SIGTERM (the handler raises),
    so a stopped orchestrator stops here at once; the next run waits what is left."""
    if seconds:
        services.reporter.note(f"waiting {seconds:.0f}s before the retry")
        services.sleep(seconds)


def owed_back_off(record: RunRecord, services: Services) -> float | None:
    """The back-off still owed by the run's last decision, if the retry it decided has
    not started yet (the charge's time is on disk: a stop does not reset the timer)."""
    last = record.verdicts[-1] if record.verdicts else None
    if last is None or last.outcome is None:
        return None
    if any(attempt.number > last.attempt for attempt in record.attempts):
        return None  # the retry has begun: whatever was owed was waited
    return back_off_owed(
        services.storage.budgets.load(record.ticket_id),
        key=charge_key(record.run_id, last.number),
        recovery=services.loaded.config.recovery,
        now=services.clock(),
        since=infra_window_start(record),
    )


def describe_failure(attempt: Attempt) -> str:
    """One line saying what failed, and what the failed program said about it, for the
    halt record and the terminal."""
    where = f"see {attempt.log_path}" if attempt.log_path else "no log"
    check = attempt.failing_check
    said = last_error_line_of(attempt.failed_log)
    tail = f": {said}; {where}" if said else f"; {where}"
    if check is not None:
        how = "timed out" if check.timed_out else f"exited {check.exit_code}"
        if check.signal and not check.timed_out:
            how = f"was killed by signal {check.signal}"
        return f"check {check.name!r} {how}{tail}"
    if attempt.error:
        return f"stage {attempt.stage!r}: {attempt.error}; {where}"
    if attempt.timed_out:
        return f"stage {attempt.stage!r} timed out (exit 124){tail}"
    if attempt.signal:
        return f"stage {attempt.stage!r} was killed by signal {attempt.signal}{tail}"
    return f"stage {attempt.stage!r} exited {attempt.exit_code}{tail}"
