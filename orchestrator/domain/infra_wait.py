"""Waiting out an outage across batches (issue 43), pure: which failures a later batch may
find gone, how old an outage is, when it is too old, and which infrastructure retries
count against the ticket's cap.

An outage of the forge, the model provider or the network is the world's, not the
ticket's: once the in-batch back-off is used up the run waits (``waiting-infra``) and the
next batch goes on from the failed stage with a fresh round of infrastructure retries —
the retries an earlier batch spent on the outage no longer count against the cap
(``infra_window_start``). What bounds the waiting is the outage's age
(``outage_since``), measured from the first failure of the outage, against
``[recovery] infra_wait_max_h``: past it, a person is told.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Attempt, AttemptStatus, ResumeRecord, RunRecord
from orchestrator.domain.transcripts import CallError

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig

# The failure classes (``engines.base.FailureClass`` and the forge's, ``forges``) that
# are the world's and pass by themselves: a throttle, a service down, the network.
WAITED_OUT_CLASSES: Final[frozenset[str]] = frozenset({"rate_limited", "outage", "network"})

# Who takes a run out of ``waiting-infra`` (its ``resumes`` entry): the next run of it.
NEXT_RUN = "next-run"


def waits_out(failure_class: str | None) -> bool:
    """Whether a failure of this class, its retries spent, waits for a later batch."""
    return failure_class in WAITED_OUT_CLASSES


# How a model call fails when the model provider, not the ticket, is the trouble: a
# throttle, an overloaded or failing service (5xx, 529), the network, a timeout. A key
# refused, a refusal, a malformed or cut-off reply, a 4xx or our own bug are not.
MODEL_OUTAGES: Final[frozenset[CallError]] = frozenset(
    {CallError.RATE_LIMITED, CallError.SERVER, CallError.CONNECTION, CallError.TIMEOUT}
)


def model_call_waits_out(error: CallError | None) -> bool:
    """Whether a diagnosis whose model call failed so (after the gateway's own retries)
    waits for a later batch to decide, its diagnosis not counted against the cap."""
    return error in MODEL_OUTAGES


def _ends_a_wait(entry: ResumeRecord) -> bool:
    reasons = (HaltReason.INFRA_UNAVAILABLE, HaltReason.INFRA_WAIT_EXPIRED)
    return entry.from_state is RunState.WAITING_INFRA or (
        entry.halt is not None and entry.halt.reason in reasons
    )


def infra_window_start(record: RunRecord) -> datetime | None:
    """Since when infrastructure retries count against the ticket's cap: the last time
    the run went on after waiting out an outage (None: since ever). The retries spent
    before it were the outage's, not the ticket's."""
    return next((r.at for r in reversed(record.resumes) if _ends_a_wait(r)), None)


def outage_since(record: RunRecord) -> datetime | None:
    """When the outage the run is in began: the end of the first of the run's last
    attempts that all failed for a class ``waits_out`` (interrupted ones pass over),
    since a person last resumed it after the wait ran out. None: the last attempt did
    not fail so."""
    floor = next(
        (
            r.at
            for r in reversed(record.resumes)
            if r.halt is not None and r.halt.reason is HaltReason.INFRA_WAIT_EXPIRED
        ),
        None,
    )
    since = None
    for attempt in reversed(record.attempts):
        if attempt.status is AttemptStatus.INTERRUPTED:
            continue
        if attempt.ok or not waits_out(attempt.failure_class):
            break
        at = attempt.ended_at or attempt.started_at
        if floor is not None and at < floor:
            break
        since = at
    finished = [a for a in record.attempts if a.status is not AttemptStatus.INTERRUPTED]
    last = finished[-1] if finished else None
    if since is None and last is not None and not last.ok and _model_unavailable(record, last):
        # The failure's decision waits for the model provider: the outage began as it failed.
        at = last.ended_at or last.started_at
        since = at if floor is None or at >= floor else None
    return since


def _model_unavailable(record: RunRecord, attempt: Attempt) -> bool:
    return any(v.attempt == attempt.number and v.model_unavailable for v in record.verdicts)


def infra_wait_expired(since: datetime, now: datetime, max_hours: float) -> bool:
    """Whether an outage that began at ``since`` has lasted ``max_hours`` by ``now``."""
    return (now - since).total_seconds() >= max_hours * 3600.0


def wait_ran_out(record: RunRecord, loaded: LoadedConfig, *, now: datetime) -> RunRecord | None:
    """``record``, waiting out an outage older than ``[recovery] infra_wait_max_h``,
    stopped ``needs-human`` (``infra_wait_expired``) for a person to be told. None while the
    run does not wait, or the wait goes on."""
    if record.state is not RunState.WAITING_INFRA:
        return None
    max_h = loaded.config.recovery.infra_wait_max_h
    since = outage_since(record) or record.updated_at
    if not infra_wait_expired(since, now, max_h):
        return None
    waited = record.halt
    stage = waited.stage if waited else record.current_stage
    detail = (
        f"the infrastructure stayed down for {round((now - since).total_seconds() / 3600, 1)} h (since "
        f"{since:%Y-%m-%dT%H:%M:%SZ}), longer than [recovery] infra_wait_max_h = {max_h} "
        f"in {loaded.path}; last: {waited.detail if waited else '-'}. Once the "
        f"forge, model provider or network is back: `orchestrator resume {record.run_id}`"
    )
    reason = HaltReason.INFRA_WAIT_EXPIRED
    return record.halted(RunState.NEEDS_HUMAN, reason=reason, stage=stage, detail=detail, now=now)


def left_waiting(record: RunRecord, *, at: datetime) -> RunRecord:
    """``record`` taken out of ``waiting-infra`` by the next run of it: running again at
    the stage that waited, the wait kept in a ``resumes`` entry (by ``NEXT_RUN``), whose
    time starts a fresh round of infrastructure retries (``infra_window_start``)."""
    halt = record.halt
    stage = (halt.stage if halt else None) or record.current_stage or ""
    entry = ResumeRecord(at=at, by=NEXT_RUN, from_state=record.state, halt=halt, stage=stage)
    moved = record.transition(RunState.RUNNING, now=at, stage=stage or None)
    return moved.model_copy(update={"resumes": (*record.resumes, entry)})
