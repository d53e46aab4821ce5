"""What a batch keeps of itself for later readers (``orchestrator report --batch ID``):
its id, when it began and ended, each ticket's result and run, and its model spend as its
budget recorded it. Pure: builds the record; the storage layer writes it."""

from __future__ import annotations

from datetime import datetime

from orchestrator.batch.results import TicketResult
from orchestrator.storage import BatchRecord, BatchSpend, BatchTicket, Spend


def batch_record(
    batch_id: str,
    *,
    backend: str,
    started_at: datetime,
    results: list[TicketResult] | None = None,
    spend: Spend | None = None,
    ended_at: datetime | None = None,
    interrupted: bool = False,
) -> BatchRecord:
    """The record as it stands: at the start (no results yet), or at the end."""
    return BatchRecord(
        batch_id=batch_id,
        backend=backend,
        started_at=started_at,
        ended_at=ended_at,
        # (the result's and the spend's fields of the same names; the rest is not kept)
        tickets=tuple(BatchTicket.model_validate(r, from_attributes=True) for r in results or ()),
        spend=BatchSpend.model_validate(spend, from_attributes=True) if spend is not None else None,
        interrupted=interrupted,
    )
