"""The report's typed data: what the reader gathered from the state dir, in the shape the
page and the metrics are rendered from, plus the pure sums both need.

Plain frozen dataclasses, not validated models: nothing here crosses a boundary (the
reader built every value from records the storage layer has already validated), and a
report over a thousand runs builds tens of thousands of them.

Paths are absolute files the reader found on disk; the page makes them relative to where
it is written. A figure the state dir did not record is None, shown as "not recorded":
the report never fills a gap with a guess.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CheckView:
    name: str
    exit_code: int | None
    timed_out: bool
    skipped: bool
    duration_s: float
    failure_class: str | None = None
    log: Path | None = None
    already_on_base: bool = False  # failed only as the base does: judged passed


@dataclass(frozen=True, slots=True)
class AttemptView:
    number: int
    stage: str
    status: str  # running | finished | interrupted
    ok: bool
    summary: str  # ``exit 0 in 0.41s``, ``check x exited 1 after 2.00s``, ...
    started_at: datetime
    ended_at: datetime | None
    duration_s: float | None
    exit_code: int | None
    timed_out: bool
    engine: str | None = None
    model: str | None = None
    failing_check: str | None = None
    failure_class: str | None = None
    failure_detail: str | None = None
    checks: tuple[CheckView, ...] = ()
    log: Path | None = None
    log_note: str | None = None  # why there is no log to open (pruned, missing)
    error_lines: tuple[str, ...] = ()  # a failure's last error lines, redacted
    engine_cost_usd: float | None = None  # what the engine reported, when it did


@dataclass(frozen=True, slots=True)
class RecipeView:
    """What a mechanical fix ran and what the verifier said about it."""

    commands: tuple[tuple[str, int | None], ...]  # (the argv as a shell line, exit code)
    verifier: str | None
    verifier_exit: int | None
    status: str | None  # green | red | planned ...
    red_reason: str | None
    sandbox: str | None


@dataclass(frozen=True, slots=True)
class ApprovalView:
    approved: bool
    by: str
    at: datetime
    reason: str | None


@dataclass(frozen=True, slots=True)
class DecisionView:
    number: int
    attempt: int
    source: str
    action: str
    outcome: str | None
    summary: str = ""
    reason: str = ""
    confidence: float | None = None
    routing: str | None = None
    valid: bool = True
    failing_stage: str | None = None
    failing_check: str | None = None
    model: str | None = None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: calls were made at a price not on record
    recipe: RecipeView | None = None
    approval: ApprovalView | None = None
    verdict_file: Path | None = None
    bundle_file: Path | None = None
    unreadable: str | None = None  # the verdict file could not be read: why


@dataclass(frozen=True, slots=True)
class Awaiting:
    """A decision waiting for a person, and the exact commands that answer it."""

    run_id: str
    ticket_id: str
    number: int
    action: str
    summary: str
    routing: str | None
    confidence: float | None
    approve_command: str
    reject_command: str


@dataclass(frozen=True, slots=True)
class HaltView:
    reason: str
    stage: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class RunView:
    run_id: str
    ticket_id: str
    title: str
    kind: str
    state: str
    current_stage: str | None
    created_at: datetime
    updated_at: datetime
    halt: HaltView | None = None
    attempts: tuple[AttemptView, ...] = ()
    decisions: tuple[DecisionView, ...] = ()
    awaiting: Awaiting | None = None
    handoff_text: str | None = None
    handoff_file: Path | None = None
    pull_request: str | None = None
    sub_tickets: tuple[str, ...] = ()
    resumes: tuple[str, ...] = ()  # one line per person's resume
    record_file: Path | None = None


@dataclass(frozen=True, slots=True)
class Spend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: not recorded (a call at an unknown price)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Spend) -> Spend:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else round(self.cost_usd + other.cost_usd, 6)
        )
        return Spend(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
        )


@dataclass(frozen=True, slots=True)
class BudgetView:
    """The batch's model budget: what its budget file recorded against the ``[batch]``
    caps (0: no cap)."""

    spent: Spend | None  # None: the batch recorded no spend
    max_model_calls: int
    max_tokens: int
    max_cost_usd: float


@dataclass(frozen=True, slots=True)
class BatchTicketView:
    ticket: str
    status: str
    run_id: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class BatchView:
    batch_id: str
    backend: str
    started_at: datetime
    ended_at: datetime | None
    tickets: tuple[BatchTicketView, ...]
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class ReportData:
    title: str
    scope: str  # which runs, in words: "batch X", "runs updated since D", ...
    generated_at: datetime
    state_dir: Path
    runs: tuple[RunView, ...]
    batch: BatchView | None = None
    budget: BudgetView | None = None
    warnings: tuple[str, ...] = field(default=())  # files that could not be read
    # Runs a later run of their ticket replaced (that run may be outside the selection).
    superseded: frozenset[str] = field(default=frozenset())


# --- sums the page and the metrics share (pure) ------------------------------------------


def spend_of(run: RunView) -> Spend:
    total = Spend()
    for decision in run.decisions:
        total = total + Spend(
            decision.calls, decision.input_tokens, decision.output_tokens, decision.cost_usd
        )
    return total


def total_spend(runs: tuple[RunView, ...]) -> Spend:
    total = Spend()
    for run in runs:
        total = total + spend_of(run)
    return total


def outcome_counts(runs: tuple[RunView, ...]) -> dict[str, int]:
    """Runs by state, the most common first (ties by name)."""
    counts = Counter(run.state for run in runs)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def decision_mix(runs: tuple[RunView, ...], by: str) -> dict[str, int]:
    """Decisions counted by ``action`` or by ``source``, the most common first."""
    counts = Counter(getattr(d, by) for run in runs for d in run.decisions)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def infra_retries(runs: tuple[RunView, ...]) -> int:
    """Re-runs decided by rule after an infrastructure failure (no model call)."""
    return sum(1 for r in runs for d in r.decisions if d.source == "infra" and d.action == "retry")


def time_span(runs: tuple[RunView, ...]) -> tuple[datetime, datetime] | None:
    if not runs:
        return None
    return min(r.created_at for r in runs), max(r.updated_at for r in runs)


def stage_durations(runs: tuple[RunView, ...]) -> dict[str, tuple[int, float]]:
    """Per stage: how many finished attempts, and their total seconds."""
    found: dict[str, tuple[int, float]] = {}
    for run in runs:
        for attempt in run.attempts:
            if attempt.duration_s is None:
                continue
            count, seconds = found.get(attempt.stage, (0, 0.0))
            found[attempt.stage] = (count + 1, seconds + attempt.duration_s)
    return dict(sorted(found.items()))


def latest_of_each_ticket(data: ReportData) -> tuple[RunView, ...]:
    """The runs that are their ticket's latest (``data.runs`` is oldest first): what
    waits for a person is what the newest run of a ticket waits for, never an older run
    a rerun has since replaced, completed or not."""
    latest = {run.ticket_id: run.run_id for run in data.runs}
    return tuple(
        run
        for run in data.runs
        if latest[run.ticket_id] == run.run_id and run.run_id not in data.superseded
    )


def awaiting(runs: tuple[RunView, ...]) -> list[Awaiting]:
    return [r.awaiting for r in runs if r.awaiting is not None]
