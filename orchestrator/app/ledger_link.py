"""How the recovery loop uses the decision ledger (``storage/ledger/``): one row per decision
(appended from the persisted decision, with a row per investigation tool step before
it), one superseding row per outcome, and the history of past outcomes for a failure
signature, which feeds confidence.

Rows are keyed by ``decision_id`` (ticket run, attempt, verdict number): a redelivered
decision finds its row and does not append another.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.domain.decisions import LedgerEntry
from orchestrator.domain.errors import StateError
from orchestrator.domain.proposals import History, Proposal
from orchestrator.recovery.confidence import RECENT_OUTCOMES, PastOutcome, decayed_history
from orchestrator.storage import open_state
from orchestrator.storage.ledger import LedgerRow, key_from_env

if TYPE_CHECKING:
    from orchestrator.app.services import Services
    from orchestrator.storage import DecisionLedger, VerdictFile, VerdictRecord


def ledger_for(state_dir: Path, environ: Mapping[str, str]) -> DecisionLedger:
    """The state dir's own ledger, keyed as ``environ`` says (what ``reset`` and ``resume``
    open, as the run's ``Services.storage`` does)."""
    return open_state(state_dir).ledger(key_from_env(environ))


def ledger_row(entry: LedgerEntry, *, ts: str) -> LedgerRow:
    """The row an entry the recovery loop prepared is appended as, at the time ``ts``: the
    one place an entry becomes a row (an entry has no time, outcome or superseded row)."""
    return LedgerRow(**entry.model_dump(), ts=ts)


def aware_time(ts: str) -> datetime | None:
    """An ISO time (a ledger row's, a comment's), one without a zone read as UTC; None
    when it does not read (such a row is left out of the history)."""
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class LedgerLink:
    def __init__(self, ledger: DecisionLedger) -> None:
        self.ledger = ledger

    @classmethod
    def for_services(cls, services: Services) -> LedgerLink:
        return cls(services.storage.ledger(key_from_env(services.environ)))

    def history(self, signature: str) -> dict[str, History]:
        """Per action: how often a decision for this failure signature went green."""
        found = self.ledger.history(signature)  # indexed: no scan of the ledger
        return {a: History(green=h.green, total=h.total) for a, h in found.items()}

    def recent_history(self, signature: str, *, now: datetime) -> dict[str, History]:
        """Per action: the latest outcomes for this failure signature, weighted by age
        (``confidence.decayed_history``). What a decision's confidence is given; indexed."""
        found = self.ledger.recent_outcomes(signature, RECENT_OUTCOMES)
        return {
            action: decayed_history(
                (PastOutcome(at=at, green=o.green) for o in outcomes if (at := aware_time(o.ts))),
                now=now,
            )
            for action, outcomes in found.items()
        }

    def record_decision(self, entries: Sequence[LedgerEntry], *, ts: str) -> str:
        """The decision's entries (``exit`` prepared them: each investigation step, then the
        decision) appended once, at the time ``ts``: a redelivered decision finds its row
        and appends nothing. Returns the decision row's hash."""
        decision = entries[-1]
        rows = self.ledger.rows_of(decision.decision_id)
        existing = next((r for r in rows if r.get("kind") == "decision"), None)
        if existing is not None:
            return str(existing["entry_hash"])
        # Killed between the rows: the steps already appended are not appended again.
        steps = {_step_of(r) for r in rows if r.get("kind") == "trace"}
        row: dict[str, Any] = {}
        for entry in entries:
            if entry.kind == "trace" and _step_of(entry.model_dump()) in steps:
                continue
            row = self.ledger.append(ledger_row(entry, ts=ts))
        return str(row["entry_hash"])

    def record_verdict(self, decided: VerdictRecord, *, ts: str) -> str | None:
        """The rows of the persisted decision ``decided``, rebuilt from its verdict file
        exactly as they were prepared when it was decided, appended unless they are there
        (keyed by decision id). None when done; else why they cannot be: a file written
        before decisions kept their inputs (a missing row of it stays missing)."""
        from orchestrator.recovery.audit import ledger_entries
        from orchestrator.recovery.graph import NODE_ORDER

        if decided.inputs is None:
            return "written before decisions kept their inputs; cannot rebuild its row"
        self.record_decision(ledger_entries(decided, decided.inputs, NODE_ORDER), ts=ts)
        return None

    def outcome(self, proposal: Proposal, outcome: str, *, ts: str) -> None:
        """A new row that supersedes the decision's (never an update); once per decision."""
        rows = self.ledger.rows_of(proposal.decision_id)
        decision_row = next((r for r in rows if r.get("kind") == "decision"), None)
        if decision_row is None:
            raise StateError(
                f"state error: {getattr(self.ledger, 'path', 'the ledger')}: no decision row for {proposal.decision_id}"
            )
        already = any(
            r.get("kind") == "outcome" and r.get("supersedes") == decision_row["entry_hash"]
            for r in rows
        )
        if not already:
            self.ledger.append_outcome(decision_row, outcome, ts=ts)


def unrecorded(ledger: DecisionLedger, verdicts: Iterable[VerdictFile]) -> list[VerdictFile]:
    """The verdict files whose decision has no row in ``ledger``: persisted, and the
    process died before the row (the ticket's next run appends it, as ``mend`` does).
    One pass over the ledger; each verdict file is read for its decision id only. A file
    written before decisions kept their inputs is left out: its row cannot be rebuilt,
    and nothing says the version that wrote it ledgered every decision."""
    verdicts = list(verdicts)
    if not verdicts:
        return []  # no need to read the ledger
    recorded = {r.get("decision_id") for r in ledger.rows() if r.get("kind") == "decision"}
    missing = []
    for verdict in verdicts:
        try:
            decided = json.loads(verdict.path.read_bytes())
            decision_id, inputs = decided.get("decision_id"), decided.get("inputs")
        except (OSError, ValueError, AttributeError):
            decision_id, inputs = None, True  # unreadable: reported, and mend says why
        if decision_id not in recorded and inputs:
            missing.append(verdict)
    return missing


def mend(ledger: DecisionLedger, verdict: VerdictFile, *, ts: str) -> str | None:
    """Append the rows of the decision in ``verdict`` (``LedgerLink.record_verdict``).
    None when done; else why it cannot be (also: a file that does not read)."""
    from orchestrator.storage.decisions import read_verdict

    try:
        decided = read_verdict(verdict.path)
    except StateError as exc:
        return str(exc)
    why = LedgerLink(ledger).record_verdict(decided, ts=ts)
    return f"{verdict.path}: {why}" if why else None


def _step_of(row: Mapping[str, Any]) -> object:
    decision = row.get("decision")
    return decision.get("step") if isinstance(decision, Mapping) else None
