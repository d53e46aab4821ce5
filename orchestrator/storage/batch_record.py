"""What a batch ran: ``batches/<batch-id>/batch.json``, written atomically when the batch
starts (its id and time) and again when it ends (each ticket, the run it ended in, the
batch's model spend as its budget recorded it). ``orchestrator report --batch ID`` reads it.

Batches from before this record existed left only ``budget.json`` and, with ``--jobs N``,
their workers' logs (one JSON line per ticket, with its run id): those logs still answer
which runs such a batch touched; a ``--jobs 1`` batch of that age has no such trace.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import Frozen, read_model
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import StateLayout

# A batch id names a directory under ``batches/``: what a person types must not reach
# anywhere else (``--batch ../..``).
BATCH_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def is_batch_id(text: str) -> bool:
    return BATCH_ID.match(text) is not None and ".." not in text


class BatchTicket(Frozen):
    """One ticket as the batch reported it."""

    ticket: str
    status: str  # a run state, or already-<state>, skipped, refused, queued, deferred, ...
    run_id: str | None = None
    detail: str = ""
    seconds: float = 0.0
    ran: bool = False
    halt: str | None = None


class BatchSpend(Frozen):
    """The batch's model spend as its budget recorded it when the batch ended."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class BatchRecord(Frozen):
    batch_id: str
    backend: str = "local"  # local | celery
    started_at: datetime
    ended_at: datetime | None = None  # None: still running, or killed before its end
    tickets: tuple[BatchTicket, ...] = ()
    spend: BatchSpend | None = None  # None: not recorded (a batch from before the record)
    interrupted: bool = False


def write_batch_record(layout: StateLayout, record: BatchRecord) -> None:
    if not is_batch_id(record.batch_id):
        raise StateError(f"state error: {record.batch_id!r} is not a batch id")
    atomic_write(
        layout.batch_record_path(record.batch_id), record.model_dump_json(indent=2).encode()
    )


def _from_worker_logs(layout: StateLayout, batch_id: str) -> BatchRecord | None:
    """An older ``--jobs N`` batch, as its workers' logs tell it (no spend, no times but
    the logs' own)."""
    logs = layout.batch_worker_logs(batch_id)
    if not logs:
        return None
    tickets: dict[str, BatchTicket] = {}
    started: datetime | None = None
    for log in logs:
        try:
            text = log.read_text(errors="replace")
            moment = datetime.fromtimestamp(log.stat().st_mtime).astimezone()
        except OSError as exc:
            raise StateError(f"state error: {log}: cannot read: {exc.strerror}") from None
        started = moment if started is None else min(started, moment)
        for line in text.splitlines():
            fields = _result_line(line)
            if fields is None:
                continue
            seen = BatchTicket(
                ticket=str(fields["ticket"]),
                status=str(fields.get("status", "")),
                run_id=fields.get("run_id") if isinstance(fields.get("run_id"), str) else None,
                detail=str(fields.get("detail", "")),
                ran=bool(fields.get("ran", False)),
            )
            current = tickets.get(seen.ticket)
            if current is None or (seen.ran and not current.ran):  # the worker that ran it
                tickets[seen.ticket] = seen
    assert started is not None
    return BatchRecord(
        batch_id=batch_id,
        started_at=started,
        tickets=tuple(sorted(tickets.values(), key=lambda t: t.ticket)),
    )


def _result_line(line: str) -> dict[str, Any] | None:
    if not line.startswith('{"ticket"'):
        return None
    try:
        fields = json.loads(line)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) and "ticket" in fields else None


LATEST: Final = "latest"


def latest_batch_id(layout: StateLayout) -> str | None:
    """The batch that started last: by its record's start time, or, for a batch from
    before records, its directory's time. None when no batch has run here. (A batch id
    the user chose need not sort by time, so the ids alone cannot say.)"""
    newest: tuple[float, str] | None = None
    for batch_id in layout.batch_ids():
        if not is_batch_id(batch_id):
            continue
        try:
            record = read_model(layout.batch_record_path(batch_id), BatchRecord, "batch record")
            started = (
                record.started_at.timestamp()
                if record is not None
                else layout.batch_dir(batch_id).stat().st_mtime
            )
        except (StateError, OSError):
            continue  # a damaged batch is not the one to report on; report --batch ID says why
        if newest is None or (started, batch_id) > newest:
            newest = (started, batch_id)
    return None if newest is None else newest[1]


def read_batch_record(layout: StateLayout, batch_id: str) -> BatchRecord | None:
    """The batch's record; for an older batch, what its workers' logs say; None when the
    batch left neither (or never existed)."""
    if not is_batch_id(batch_id):
        raise StateError(f"state error: {batch_id!r} is not a batch id")
    record = read_model(layout.batch_record_path(batch_id), BatchRecord, "batch record")
    return record if record is not None else _from_worker_logs(layout, batch_id)


def write_batch_queue(layout: StateLayout, batch_id: str, paths: list[Path]) -> None:
    """The ticket files a ``--jobs N`` batch took in from its ``[[sources]]``, as absolute
    paths, for its workers (``batch_queue_path``); written atomically."""
    data = json.dumps([str(path.resolve()) for path in paths]) + "\n"
    atomic_write(layout.batch_queue_path(batch_id), data.encode())


def read_batch_queue(layout: StateLayout, batch_id: str) -> Any:
    """What ``write_batch_queue`` wrote, parsed (the caller judges its shape); OSError or
    ValueError when it cannot be read."""
    return json.loads(layout.batch_queue_path(batch_id).read_text(encoding="utf-8"))
