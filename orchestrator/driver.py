"""Run one ticket: open (or resume) its run, drive the stages in order, persist after
every step. ``run_ticket`` is a plain function of on-disk inputs and injected services,
so a queue worker can call it as it is.

Resuming: a run that is not terminal is picked up where it stopped. Completed stages are
never re-run. An attempt that was running when the orchestrator died is marked
``interrupted`` and its process group (if it outlived us) is killed before the stage
starts again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from orchestrator import runner
from orchestrator.config import EngineConfig, LoadedConfig, StageConfig
from orchestrator.display import Reporter
from orchestrator.errors import StateError
from orchestrator.pipeline import (
    HaltReason,
    RunState,
    dry_run_armed,
    halt_reason_for_failure,
    is_terminal,
)
from orchestrator.stage_env import StageContext, expand_command, stage_environ, work_branch
from orchestrator.state import (
    Attempt,
    AttemptStatus,
    CheckResult,
    FailingCheck,
    Halt,
    RunRecord,
    RunStore,
    StageRecord,
    StageStatus,
    new_run_id,
    ticket_lock,
    utcnow,
)
from orchestrator.tickets import Ticket

PR_RECORD_NAME = "pull-request.json"


@dataclass(frozen=True)
class Services:
    """Everything a ticket run touches, passed in (tests swap the reporter and clock)."""

    loaded: LoadedConfig
    store: RunStore
    reporter: Reporter
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Callable[[], datetime] = utcnow
    run_process: Callable[..., runner.ProcessOutcome] = runner.run_process
    tick_s: float = 1.0


def run_ticket(ticket: Ticket, services: Services, *, rerun: bool = False) -> RunRecord:
    """Drive ``ticket`` to a terminal state (or until interrupted) and return its record.

    Holds the ticket's lock throughout; raises TicketLocked if another process has it.
    A ticket whose latest run completed is not run again unless ``rerun``.
    """
    with ticket_lock(services.store.state_dir, ticket.id):
        record, resumed = _open_run(ticket, services, rerun=rerun)
        services.reporter.run_opened(record, resumed=resumed)
        if is_terminal(record.state):
            return record
        record = _drive(record, services)
        services.reporter.run_finished(record)
        return record


def _open_run(ticket: Ticket, services: Services, *, rerun: bool) -> tuple[RunRecord, bool]:
    store = services.store
    latest = store.latest_for_ticket(ticket.id)
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
    now = services.clock()
    store = services.store
    run_id = new_run_id(ticket.id, now)
    run_dir = store.run_dir(run_id)
    snapshot = _snapshot_ticket(ticket, run_dir / "ticket")
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
        clone_dir=str(run_dir / "clone"),
        created_at=now,
        updated_at=now,
        stages=tuple(StageRecord(name=s.name) for s in services.loaded.config.stages),
    )
    store.save(record)
    return record


def _settle_interrupted(record: RunRecord, services: Services) -> RunRecord:
    """Attempts still marked running belong to a dead orchestrator: kill what they left
    behind, mark them interrupted, and put their stage back to pending."""
    for attempt in record.attempts:
        if attempt.status is not AttemptStatus.RUNNING:
            continue
        if attempt.pgid is not None:
            killed = runner.kill_stale_group(
                runner.ProcessIdentity(attempt.pgid, attempt.start_ticks)
            )
            if killed:
                services.reporter.note(f"killed process group {attempt.pgid} left by a dead run")
        record = record.with_attempt(
            attempt.model_copy(
                update={"status": AttemptStatus.INTERRUPTED, "ended_at": services.clock()}
            )
        ).with_stage_status(attempt.stage, StageStatus.PENDING)
    services.store.save(record)
    return record


def _drive(record: RunRecord, services: Services) -> RunRecord:
    store, config = services.store, services.loaded.config
    record = _settle_interrupted(record, services)
    if record.state is RunState.PENDING:
        record = record.transition(RunState.RUNNING, now=services.clock())
        store.save(record)
    for stage in config.stages:
        if record.stage_status(stage.name) is StageStatus.COMPLETED:
            continue
        if stage.side_effectful and dry_run_armed(services.environ):
            halt = Halt(
                reason=HaltReason.DRY_RUN_BLOCK,
                stage=stage.name,
                detail=(
                    f"stage {stage.name!r} is side-effectful and DRY_RUN is armed; "
                    "set DRY_RUN=false in the environment to allow it, then run the ticket again"
                ),
            )
            record = record.with_stage_status(stage.name, StageStatus.BLOCKED).transition(
                RunState.NEEDS_HUMAN, now=services.clock(), halt=halt, stage=stage.name
            )
            store.save(record)
            return record
        record, attempt = run_stage(record, stage, services)
        if not attempt.ok:
            reason = halt_reason_for_failure(
                timed_out=attempt.timed_out, check_stage=stage.is_check_stage
            )
            halt = Halt(reason=reason, stage=stage.name, detail=describe_failure(attempt))
            record = record.transition(
                RunState.FAILED, now=services.clock(), halt=halt, stage=stage.name
            )
            store.save(record)
            return record
    record = record.transition(RunState.COMPLETED, now=services.clock())
    store.save(record)
    return record


def describe_failure(attempt: Attempt) -> str:
    """One line saying what failed, for the halt record and the terminal."""
    where = f"see {attempt.log_path}" if attempt.log_path else "no log"
    if attempt.failing_check is not None:
        check = attempt.failing_check
        how = "timed out" if check.timed_out else f"exited {check.exit_code}"
        return f"check {check.name!r} {how}; {where}"
    if attempt.error:
        return f"stage {attempt.stage!r}: {attempt.error}; {where}"
    if attempt.timed_out:
        return f"stage {attempt.stage!r} timed out (exit 124); {where}"
    if attempt.signal:
        return f"stage {attempt.stage!r} was killed by signal {attempt.signal}; {where}"
    return f"stage {attempt.stage!r} exited {attempt.exit_code}; {where}"


def _engine_and_model(stage: StageConfig, engines: Mapping[str, EngineConfig]) -> tuple[str, str]:
    if stage.engine is None:
        return "", ""
    ladder = engines[stage.engine].models
    return stage.engine, stage.model or (ladder[0] if ladder else "")


def run_stage(
    record: RunRecord, stage: StageConfig, services: Services
) -> tuple[RunRecord, Attempt]:
    """Run one attempt of ``stage`` and persist it (start, process identity, result).
    Returns the updated record and the finished attempt. Interruption marks the attempt
    ``interrupted``, saves, and propagates."""
    store, loaded = services.store, services.loaded
    engine, model = _engine_and_model(stage, loaded.config.engines)
    number = record.counters.attempts + 1
    attempt = Attempt(
        number=number,
        stage=stage.name,
        status=AttemptStatus.RUNNING,
        engine=engine or None,
        model=model or None,
        started_at=services.clock(),
    )
    record = (
        record.with_attempt(attempt)
        .with_stage_status(stage.name, StageStatus.RUNNING)
        .model_copy(
            update={
                "counters": record.counters.model_copy(update={"attempts": number}),
                "current_stage": stage.name,
                "updated_at": services.clock(),
            }
        )
    )
    store.save(record)
    ctx = StageContext(
        ticket_file=Path(record.ticket_snapshot),
        ticket_id=record.ticket_id,
        ticket_kind=record.ticket_kind,
        repository=record.repository,
        base_branch=record.base_branch,
        run_id=record.run_id,
        run_dir=Path(record.run_dir),
        clone_dir=Path(record.clone_dir),
        state_dir=store.state_dir,
        stage=stage.name,
        engine=engine,
        model=model,
        attempt=number,
    )
    logs = Path(record.run_dir) / "logs"
    cwd = Path(record.clone_dir) if stage.cwd == "clone" else Path(record.run_dir)
    cwd.parent.mkdir(parents=True, exist_ok=True)

    def remember_group(identity: runner.ProcessIdentity) -> None:
        nonlocal record, attempt
        attempt = attempt.model_copy(
            update={"pgid": identity.pgid, "start_ticks": identity.start_ticks}
        )
        record = record.with_attempt(attempt)
        store.save(record)

    try:
        if stage.is_check_stage:
            attempt = _run_checks(attempt, stage, ctx, cwd, logs, services, remember_group)
        else:
            argv = stage.command or loaded.config.engines[engine].command
            argv = expand_command(argv, root=loaded.root, ctx=ctx)
            services.reporter.stage_started(record, stage.name, number, "")
            outcome = services.run_process(
                argv,
                cwd=cwd,
                env=stage_environ(services.environ, ctx),
                log_path=logs / f"{number:03d}-{stage.name}.log",
                timeout_s=stage.timeout_s,
                kill_after_s=stage.kill_after_s,
                on_start=remember_group,
                on_tick=lambda elapsed: services.reporter.tick(stage.name, elapsed),
                tick_s=services.tick_s,
            )
            attempt = _finish_attempt(attempt, outcome)
    except BaseException:
        attempt = attempt.model_copy(
            update={"status": AttemptStatus.INTERRUPTED, "ended_at": services.clock()}
        )
        record = record.with_attempt(attempt).with_stage_status(stage.name, StageStatus.PENDING)
        store.save(record)
        raise
    status = StageStatus.COMPLETED if attempt.ok else StageStatus.FAILED
    record = record.with_attempt(attempt).with_stage_status(stage.name, status)
    pr_record = Path(record.run_dir) / PR_RECORD_NAME
    if attempt.ok and stage.side_effectful and pr_record.is_file():
        record = record.model_copy(update={"pull_request": str(pr_record)})
    record = record.model_copy(update={"updated_at": services.clock()})
    store.save(record)
    services.reporter.stage_finished(record, attempt)
    return record, attempt


def _finish_attempt(attempt: Attempt, outcome: runner.ProcessOutcome) -> Attempt:
    return attempt.model_copy(
        update={
            "status": AttemptStatus.FINISHED,
            "command": outcome.argv,
            "ended_at": outcome.ended_at,
            "duration_s": round(outcome.duration_s, 6),
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "signal": outcome.signal,
            "error": outcome.error,
            "log_path": str(outcome.log_path),
            "pgid": outcome.pgid,
        }
    )


def _run_checks(
    attempt: Attempt,
    stage: StageConfig,
    ctx: StageContext,
    cwd: Path,
    logs: Path,
    services: Services,
    remember_group: Callable[[runner.ProcessIdentity], None],
) -> Attempt:
    """Run the stage's checks in order and stop at the first that fails: that check is
    the ``failing_check`` the recovery loop will have to turn green again."""
    results: list[CheckResult] = []
    failing: FailingCheck | None = None
    last_log: str | None = None
    started = attempt.started_at
    for check in stage.checks:
        if check.kinds and ctx.ticket_kind not in check.kinds:
            results.append(
                CheckResult(name=check.name, command=check.command, exit_code=None, skipped=True)
            )
            continue
        check_ctx = StageContext(**{**ctx.__dict__, "check": check.name})
        argv = expand_command(check.command, root=services.loaded.root, ctx=check_ctx)
        services.reporter.stage_started(
            None, stage.name, attempt.number, f"check {check.name} started"
        )
        outcome = services.run_process(
            argv,
            cwd=cwd,
            env=stage_environ(services.environ, check_ctx),
            log_path=logs / f"{attempt.number:03d}-{stage.name}-{check.name}.log",
            timeout_s=check.timeout_s,
            kill_after_s=stage.kill_after_s,
            on_start=remember_group,
            on_tick=lambda elapsed, label=f"{stage.name}:{check.name}": services.reporter.tick(
                label, elapsed
            ),
            tick_s=services.tick_s,
        )
        last_log = str(outcome.log_path)
        results.append(
            CheckResult(
                name=check.name,
                command=outcome.argv,
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                duration_s=round(outcome.duration_s, 6),
                log_path=last_log,
                error=outcome.error,
            )
        )
        if not outcome.ok:
            failing = FailingCheck(
                name=check.name,
                command=outcome.argv,
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                log_path=last_log,
            )
            break
    ended = services.clock()
    return attempt.model_copy(
        update={
            "status": AttemptStatus.FINISHED,
            "ended_at": ended,
            "duration_s": round((ended - started).total_seconds(), 6),
            "exit_code": failing.exit_code if failing else 0,
            "timed_out": failing.timed_out if failing else False,
            "log_path": failing.log_path if failing else last_log,
            "checks": tuple(results),
            "failing_check": failing,
            "command": failing.command if failing else (),
        }
    )
