"""Gather a report's data from the state dir: which runs (a batch's, those active since a
date, or named ones), and for each its attempts, decisions, approvals, recipes, hand-off
and the files behind them, through the storage layer's typed records.

A damaged file does not hide the rest: a run record or verdict file that cannot be read
becomes a warning on the page (and a line on stderr from the command), never a crash.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.domain.errors import StateError, UsageError
from orchestrator.reports.display import attempt_summary, failed_log
from orchestrator.reports.report_data import (
    ApprovalView,
    AttemptView,
    Awaiting,
    BatchTicketView,
    BatchView,
    BudgetView,
    CheckView,
    DecisionView,
    HaltView,
    RecipeView,
    ReportData,
    RunView,
    Spend,
)
from orchestrator.reports.telling import error_lines_of
from orchestrator.storage.batch_budget import estimate_cost
from orchestrator.storage.batch_record import BatchRecord, is_batch_id, read_batch_record
from orchestrator.storage.decisions import VerdictRecord
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import run_record_paths
from orchestrator.storage.retention import PrunedMark, read_mark
from orchestrator.storage.run_ids import resolve_run_id
from orchestrator.storage.runs import Attempt, RunRecord, VerdictRef, read_record_file

AWAITING_APPROVAL = "awaiting-approval"


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs a report covers: one batch's, those updated at or after ``since``,
    the named ones (run ids, or ticket ids for their latest run), or else every run."""

    batch_id: str | None = None
    since: datetime | None = None
    run_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Context:
    """What the report is told besides the state dir: prices for the cost estimates, the
    batch caps, and the config a person's ``approve`` should be given."""

    prices: Mapping[str, PriceConfig]
    caps: BatchConfig | None = None
    config_file: Path | None = None


def _exists(path: str | Path | None) -> Path | None:
    if not path:
        return None
    found = Path(path)
    return found.resolve() if found.is_file() else None


def _checks(attempt: Attempt) -> tuple[CheckView, ...]:
    return tuple(
        CheckView(
            name=c.name,
            exit_code=c.exit_code,
            timed_out=c.timed_out,
            skipped=c.skipped,
            duration_s=c.duration_s,
            failure_class=c.failure_class,
            log=_exists(c.log_path),
        )
        for c in attempt.checks
    )


def _attempt(attempt: Attempt, pruned: PrunedMark | None) -> AttemptView:
    log_path = failed_log(attempt) if not attempt.ok else (
        Path(attempt.log_path) if attempt.log_path else None
    )  # fmt: skip
    log = _exists(log_path)
    note = None
    if log_path is not None and log is None:
        note = (
            f"log pruned on {pruned.pruned_at} (orchestrator prune)"
            if pruned is not None
            else f"log missing: {log_path}"
        )
    error_lines: tuple[str, ...] = ()
    if not attempt.ok and attempt.status == "finished" and log is not None:
        error_lines = tuple(error_lines_of(log))
    return AttemptView(
        number=attempt.number,
        stage=attempt.stage,
        status=str(attempt.status),
        ok=attempt.ok,
        summary=attempt_summary(attempt),
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        duration_s=attempt.duration_s,
        exit_code=attempt.exit_code,
        timed_out=attempt.timed_out,
        engine=attempt.engine,
        model=attempt.model,
        failing_check=attempt.failing_check.name if attempt.failing_check else None,
        failure_class=attempt.failure_class,
        failure_detail=attempt.failure_detail,
        checks=_checks(attempt),
        log=log,
        log_note=note,
        error_lines=error_lines,
        engine_cost_usd=attempt.cost_usd,
    )


def _recipe(report: Mapping[str, object] | None, number: int) -> RecipeView | None:
    """The mechanical fix decision ``number`` ran, from its report (a dict as written)."""
    if not report or report.get("verdict") != number:
        return None
    commands = []
    for command in report.get("commands") or ():  # type: ignore[attr-defined]
        if isinstance(command, dict) and isinstance(command.get("argv"), list):
            exit_code = command.get("exit_code")
            commands.append(
                (
                    shlex.join(str(a) for a in command["argv"]),
                    exit_code if isinstance(exit_code, int) else None,
                )
            )
    verifier = report.get("verifier")
    verification = report.get("verification")
    verifier_exit = verification.get("exit_code") if isinstance(verification, dict) else None
    red_reason = report.get("red_reason")
    status = report.get("status")
    sandbox = report.get("sandbox")
    return RecipeView(
        commands=tuple(commands),
        verifier=str(verifier.get("check")) if isinstance(verifier, dict) else None,
        verifier_exit=verifier_exit if isinstance(verifier_exit, int) else None,
        status=str(status) if status is not None else None,
        red_reason=str(red_reason) if red_reason else None,
        sandbox=str(sandbox) if sandbox else None,
    )


def _cost(record: VerdictRecord, prices: Mapping[str, PriceConfig]) -> float | None:
    usage = record.usage
    if usage.calls == 0 and usage.input_tokens == 0 and usage.output_tokens == 0:
        return 0.0
    if record.model is None or record.model not in prices:
        return None  # calls were made, at a price the config does not know
    return round(
        estimate_cost(dict(prices), record.model, usage.input_tokens, usage.output_tokens), 6
    )


def _decision(
    storage: FileStorage, record: RunRecord, ref: VerdictRef, context: Context
) -> DecisionView:
    layout = storage.layout
    verdict_file = _exists(ref.path) or _exists(layout.verdict_path(record.run_id, ref.number))
    bundle_file = _exists(layout.bundle_path(record.run_id, ref.number))
    base = DecisionView(
        number=ref.number,
        attempt=ref.attempt,
        source=ref.source,
        action=ref.action,
        outcome=ref.outcome,
        verdict_file=verdict_file,
        bundle_file=bundle_file,
    )
    if verdict_file is None:
        return _replace(base, unreadable=f"verdict file missing: {ref.path}")
    from orchestrator.storage.decisions import read_verdict

    try:
        decided = read_verdict(verdict_file)
    except StateError as exc:
        return _replace(base, unreadable=str(exc))
    try:
        approval = storage.approvals.read(record.run_id, ref.number)
    except StateError:
        approval = None
    recipe = None
    if ref.action == "mechanical-fix":
        recipe = _recipe(storage.runs.read_mechanical_fix(record.run_id, ref.number), ref.number)
    return _replace(
        base,
        summary=decided.verdict.summary,
        reason=decided.reason,
        confidence=decided.proposal.confidence,
        routing=str(decided.proposal.routing),
        valid=decided.valid,
        failing_stage=decided.failing_stage,
        failing_check=decided.failing_check,
        model=decided.model,
        calls=decided.usage.calls,
        input_tokens=decided.usage.input_tokens,
        output_tokens=decided.usage.output_tokens,
        cost_usd=_cost(decided, context.prices),
        recipe=recipe,
        approval=(
            ApprovalView(approval.approved, approval.by, approval.at, approval.reason)
            if approval is not None
            else None
        ),
    )


def _replace(view: DecisionView, **changes: object) -> DecisionView:
    from dataclasses import replace

    return replace(view, **changes)  # type: ignore[arg-type]


def answer_commands(run_id: str, state_dir: Path, config_file: Path | None) -> tuple[str, str]:
    """The exact ``approve`` and ``reject`` commands, with the config and state dir
    spelled out so they work from any directory."""
    options = []
    if config_file is not None:
        options += ["--config", str(config_file)]
    options += ["--state-dir", str(state_dir)]
    prefix = shlex.join(["orchestrator", *options])
    return (
        f"{prefix} approve {shlex.quote(run_id)}",
        f"{prefix} reject {shlex.quote(run_id)} --reason 'why it was rejected'",
    )


def _awaiting(
    record: RunRecord, decisions: tuple[DecisionView, ...], state_dir: Path, context: Context
) -> Awaiting | None:
    if record.state != AWAITING_APPROVAL:
        return None
    pending = next((d for d in reversed(decisions) if d.outcome is None), None)
    if pending is None:
        return None
    config_file = context.config_file or (Path(record.config_path) if record.config_path else None)
    approve, reject = answer_commands(record.run_id, state_dir, config_file)
    return Awaiting(
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        number=pending.number,
        action=pending.action,
        summary=pending.summary,
        routing=pending.routing,
        confidence=pending.confidence,
        approve_command=approve,
        reject_command=reject,
    )


def run_view(storage: FileStorage, record: RunRecord, context: Context) -> RunView:
    """One run, with everything the page shows about it."""
    layout = storage.layout
    pruned = read_mark(layout, record.run_id)
    decisions = tuple(_decision(storage, record, ref, context) for ref in record.verdicts)
    handoff_file = _exists(record.handoff) or _exists(layout.handoff_path(record.run_id))
    handoff_text = None
    if handoff_file is not None:
        try:
            handoff_text = handoff_file.read_text(errors="replace")
        except OSError:
            handoff_text = None
    state_dir = storage.root.resolve()
    return RunView(
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        title=record.ticket_title,
        kind=record.ticket_kind,
        state=str(record.state),
        current_stage=record.current_stage,
        created_at=record.created_at,
        updated_at=record.updated_at,
        halt=(
            HaltView(str(record.halt.reason), record.halt.stage, record.halt.detail)
            if record.halt is not None
            else None
        ),
        attempts=tuple(_attempt(a, pruned) for a in record.attempts),
        decisions=decisions,
        awaiting=_awaiting(record, decisions, state_dir, context),
        handoff_text=handoff_text,
        handoff_file=handoff_file,
        pull_request=record.pull_request,
        sub_tickets=record.sub_tickets,
        resumes=tuple(
            f"{r.at:%Y-%m-%d %H:%M:%S}Z by {r.by} from {r.from_state}"
            + (f" ({r.halt.reason})" if r.halt is not None else "")
            + f", at stage {r.stage}"
            for r in record.resumes
        ),
        record_file=_exists(layout.record_path(record.run_id)),
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _batch_run_ids(storage: FileStorage, batch: BatchRecord) -> list[str]:
    """The runs a batch touched: each ticket's run as the batch reported it; for a ticket
    it only queued, the ticket's latest run if it was active after the batch began."""
    found = []
    for ticket in batch.tickets:
        if ticket.run_id is not None:
            found.append(ticket.run_id)
        elif ticket.status == "queued":
            latest = storage.runs.latest_for_ticket(ticket.ticket)
            if latest is not None and _aware(latest.updated_at) >= _aware(batch.started_at):
                found.append(latest.run_id)
    return list(dict.fromkeys(found))


def _load(storage: FileStorage, paths: Iterable[Path], warnings: list[str]) -> list[RunRecord]:
    records = []
    for path in paths:
        try:
            records.append(read_record_file(path))
        except StateError as exc:
            warnings.append(str(exc))
    return records


def _budget(batch: BatchRecord, storage: FileStorage, context: Context) -> BudgetView:
    caps = context.caps or BatchConfig()
    spent: Spend | None = None
    if batch.spend is not None:
        spent = Spend(
            batch.spend.calls, batch.spend.input_tokens, batch.spend.output_tokens,
            batch.spend.cost_usd,
        )  # fmt: skip
    else:
        recorded = storage.batch_budget(batch.batch_id, caps, dict(context.prices)).read()
        if storage.layout.batch_budget_path(batch.batch_id).is_file():
            spent = Spend(
                recorded.calls, recorded.input_tokens, recorded.output_tokens, recorded.cost_usd
            )
    return BudgetView(spent, caps.max_model_calls, caps.max_tokens, caps.max_cost_usd)


def read_report(
    state_dir: Path,
    selection: Selection,
    context: Context,
    *,
    now: datetime | None = None,
) -> ReportData:
    """The report's data for ``selection``. An unknown batch or run is a usage error (the
    command exits with it); a damaged file is a warning on the page."""
    storage = FileStorage(state_dir)
    warnings: list[str] = []
    batch: BatchRecord | None = None
    if selection.batch_id is not None:
        if not is_batch_id(selection.batch_id):
            raise UsageError(f"report: --batch {selection.batch_id!r} is not a batch id")
        batch = read_batch_record(storage.layout, selection.batch_id)
        if batch is None:
            known = storage.layout.batch_ids()
            hint = f"; batches here: {', '.join(known[-5:])}" if known else ""
            raise UsageError(
                f"report: no record of batch {selection.batch_id!r} under "
                f"{storage.layout.batch_dir(selection.batch_id).parent} (batches record their "
                f"runs since this version; use --since DATE or RUN_ID… for older ones){hint}"
            )
        paths = [storage.layout.record_path(r) for r in _batch_run_ids(storage, batch)]
        records = _load(storage, (p for p in paths if p.is_file()), warnings)
        scope = f"batch {batch.batch_id}"
    elif selection.run_ids:
        ids = [resolve_run_id(storage.runs, given) for given in selection.run_ids]
        records = _load(
            storage, (storage.layout.record_path(r) for r in dict.fromkeys(ids)), warnings
        )
        scope = "runs " + ", ".join(dict.fromkeys(ids))
    else:
        records = _load(storage, run_record_paths(storage.layout.runs_dir), warnings)
        scope = "every run"
        if selection.since is not None:
            cutoff = _aware(selection.since)
            records = [r for r in records if _aware(r.updated_at) >= cutoff]
            scope = f"runs active since {cutoff:%Y-%m-%d %H:%M:%S}Z"
    records.sort(key=lambda r: (_aware(r.created_at), r.run_id))
    runs = tuple(run_view(storage, record, context) for record in records)
    warnings += [
        f"{run.run_id}: decision {d.number}: {d.unreadable}"
        for run in runs
        for d in run.decisions
        if d.unreadable
    ]
    return ReportData(
        title=f"orchestrator report: {scope}",
        scope=scope,
        generated_at=now or datetime.now(UTC),
        state_dir=state_dir.resolve(),
        runs=runs,
        batch=(
            BatchView(
                batch_id=batch.batch_id,
                backend=batch.backend,
                started_at=batch.started_at,
                ended_at=batch.ended_at,
                tickets=tuple(
                    BatchTicketView(t.ticket, t.status, t.run_id, t.detail) for t in batch.tickets
                ),
                interrupted=batch.interrupted,
            )
            if batch is not None
            else None
        ),
        budget=_budget(batch, storage, context) if batch is not None else None,
        warnings=tuple(warnings),
    )
