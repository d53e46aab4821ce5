"""Gather a report's data from the state dir: which runs (a batch's, those active since a
date, or named ones), and for each its attempts, decisions, approvals, recipes, hand-off
and the files behind them, through the storage layer's typed records.

A damaged file does not hide the rest: a run record or verdict file that cannot be read
becomes a warning on the page (and a line on stderr from the command), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.domain.config import BatchConfig
from orchestrator.domain.errors import StateError, UsageError
from orchestrator.domain.runs import RunRecord
from orchestrator.reports.report_data import (
    BatchTicketView,
    BatchView,
    BudgetView,
    ReportData,
    RunView,
    Spend,
)
from orchestrator.reports.run_reader import Context, Files, run_view
from orchestrator.storage import BatchRecord, StateStorage, open_state
from orchestrator.storage.batch_record import (
    LATEST,
    is_batch_id,
    latest_batch_id,
    read_batch_record,
)
from orchestrator.storage.layout import run_record_paths
from orchestrator.storage.run_ids import resolve_run_id
from orchestrator.storage.runs import read_record_file

__all__ = ["Context", "Selection", "read_report"]


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs a report covers: one batch's, those updated at or after ``since``,
    the named ones (run ids, or ticket ids for their latest run), or else every run."""

    batch_id: str | None = None
    since: datetime | None = None
    run_ids: tuple[str, ...] = ()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _batch_run_ids(
    storage: StateStorage, batch: BatchRecord, warnings: list[str]
) -> tuple[list[str], frozenset[str]]:
    """The runs a batch touched: each ticket's run as the batch reported it, and for each
    ticket it only queued, the ticket's latest run (the second set: kept only if it was
    active after the batch began, which its record says once read). The latest runs of
    all the queued tickets come from one listing; a queued ticket whose records cannot
    all be read is a warning."""
    queued = {t.ticket for t in batch.tickets if t.run_id is None and t.status == "queued"}
    found_latest = storage.runs.latest_runs(queued)
    latest = found_latest.run_ids
    warnings += [
        f"ticket {ticket} (queued by the batch): its latest run cannot be told: {why}"
        for ticket, why in sorted(found_latest.unreadable.items())
    ]
    found: list[str] = []
    for ticket in batch.tickets:
        if ticket.run_id is not None:
            found.append(ticket.run_id)
        elif ticket.ticket in latest:
            found.append(latest[ticket.ticket])
    reported = {t.run_id for t in batch.tickets if t.run_id is not None}
    return list(dict.fromkeys(found)), frozenset(latest.values()) - reported


def _load(
    storage: StateStorage,
    paths: Iterable[Path],
    warnings: list[str],
    context: Context,
    keep: Callable[[RunRecord], bool] = lambda record: True,
) -> list[RunView]:
    """The runs at ``paths`` that ``keep`` keeps, each record read (and validated) once
    and turned into what the page shows before the next is read: a thousand records are
    never held at once (issue 41)."""
    files = Files()
    views = []
    for path in paths:
        try:
            record = read_record_file(path)
        except StateError as exc:
            warnings.append(str(exc))
            continue
        if keep(record):
            views.append(run_view(storage, record, context, files))
    return views


def _budget(batch: BatchRecord, storage: StateStorage, context: Context) -> BudgetView:
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


def _superseded(storage: StateStorage, records: list[RunView]) -> frozenset[str]:
    """The selected runs that are not their ticket's latest run in the state dir. A
    ticket whose records cannot all be read keeps its runs (the page warns of them).
    Every ticket's latest from one listing of the runs (issue 41: one listing a ticket
    made a report over 1,000 tickets take seconds)."""
    latest = storage.runs.latest_runs({r.ticket_id for r in records}).run_ids
    return frozenset(
        r.run_id for r in records if r.ticket_id in latest and latest[r.ticket_id] != r.run_id
    )


def read_report(
    state_dir: Path,
    selection: Selection,
    context: Context,
    *,
    now: datetime | None = None,
) -> ReportData:
    """The report's data for ``selection``. An unknown batch or run is a usage error (the
    command exits with it); a damaged file is a warning on the page."""
    storage = open_state(state_dir)
    warnings: list[str] = []
    batch: BatchRecord | None = None
    if selection.batch_id is not None:
        batch_id = selection.batch_id
        if batch_id == LATEST and not storage.layout.batch_dir(LATEST).is_dir():
            # (a batch its user named "latest" is that batch)
            found = latest_batch_id(storage.layout)
            if found is None:
                raise UsageError(
                    f"report: --batch latest: no batch has run under "
                    f"{storage.layout.batch_dir(LATEST).parent}"
                )
            batch_id = found
        if not is_batch_id(batch_id):
            raise UsageError(f"report: --batch {batch_id!r} is not a batch id")
        batch = read_batch_record(storage.layout, batch_id)
        if batch is None:
            known = storage.layout.batch_ids()
            hint = f"; batches here: {', '.join(known[-5:])}" if known else ""
            raise UsageError(
                f"report: no record of batch {batch_id!r} under "
                f"{storage.layout.batch_dir(batch_id).parent} (batches record their "
                f"runs since this version; use --since DATE or RUN_ID… for older ones){hint}"
            )
        run_ids, if_active = _batch_run_ids(storage, batch, warnings)
        paths = [storage.layout.record_path(r) for r in run_ids]
        began = _aware(batch.started_at)
        views = _load(
            storage,
            (p for p in paths if p.is_file()),
            warnings,
            context,
            lambda r: r.run_id not in if_active or _aware(r.updated_at) >= began,
        )
        scope = f"batch {batch.batch_id}"
    elif selection.run_ids:
        ids = [resolve_run_id(storage.runs, given) for given in selection.run_ids]
        views = _load(
            storage, (storage.layout.record_path(r) for r in dict.fromkeys(ids)), warnings, context
        )
        scope = "runs " + ", ".join(dict.fromkeys(ids))
    else:
        scope = "every run"
        cutoff = None if selection.since is None else _aware(selection.since)
        views = _load(
            storage,
            run_record_paths(storage.layout.runs_dir),
            warnings,
            context,
            lambda r: cutoff is None or _aware(r.updated_at) >= cutoff,
        )
        if cutoff is not None:
            scope = f"runs active since {cutoff:%Y-%m-%d %H:%M:%S}Z"
    views.sort(key=lambda r: (_aware(r.created_at), r.run_id))
    superseded = _superseded(storage, views)
    runs = tuple(views)
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
        superseded=superseded,
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
