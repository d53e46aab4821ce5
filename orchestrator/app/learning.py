"""The playbook learning from a run's decisions (issue 44): the effects of the rules in
``domain/learning.py``. ``learn(record, services)`` judges every decision of the run that
was carried out, from its verdict file, its approval and the run's attempts, then
proposes the decision that proved right for its failure's signature (or adds one agreeing
outcome to the learned entry that made it), and retires a learned entry whose decision
failed verification.

The driver and ``recover`` call it at the moments a judgement can change:

* after a decision is carried out (``recover``): a mechanical fix is green or red now;
* after a stage passes (``driver._drive``): a re-run it was waiting for went green;
* before the next failure is decided (``recover``): the stage failed again after a learned
  entry's re-run, and the entry is retired before the playbook is read, so the failure goes
  to the model;
* before the run completes (``driver._drive``): whatever a kill left unlearned.

Idempotent: the lessons are a pure function of the run record and its files, the playbook
keeps each outcome once (by run and verdict) and retiring a retired entry changes nothing.
A kill between a stage passing and its proposal loses nothing: the next call in the same
run (a resume, the next stage, the run's completion) learns it. A run that ended (or
stopped for a person) before that call learns it on its resume, or not at all: a
proposal lost that way costs a model call next time, never a wrong decision.

Learning never stops a run: a verdict file that cannot be read, a playbook entry that is
gone, is told (``reporter.note``) and skipped.
"""

from __future__ import annotations

from datetime import datetime

from orchestrator.app.approval_gate import answer_of
from orchestrator.app.ledger_link import LedgerLink
from orchestrator.app.playbook import promote_after_of, propose, retire, store_for
from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.domain.errors import ConfigError, StateError, UsageError
from orchestrator.domain.learning import NEVER_LEARNED, DecisionFacts, Lesson, lessons
from orchestrator.domain.playbook import EntryStatus, Provenance
from orchestrator.domain.runs import RunRecord, VerdictRef
from orchestrator.storage import Approval, VerdictRecord
from orchestrator.storage.playbook import PlaybookStore

__all__ = ["learn"]


def _facts(
    record: RunRecord, ref: VerdictRef, services: Services
) -> tuple[DecisionFacts, VerdictRecord] | None:
    """The decision ``ref`` as the rules see it, with its verdict file; None when nothing
    can be learned from it (its file changed since the decision, or predates inputs)."""
    decided, digest = services.storage.decisions.read_with_sha256(record.run_id, ref.number)
    if ref.changed(digest) is not None or decided.inputs is None:
        return None
    answer = answer_of(approvals_of(services), record.run_id, ref.number, digest)
    approval = answer if isinstance(answer, Approval) else None
    known = decided.inputs.known
    entry = decided.playbook_entry if decided.source == "playbook" else None
    facts = DecisionFacts(
        number=ref.number,
        attempt=ref.attempt,
        stage=decided.failing_stage,
        check=decided.failing_check,
        source=decided.source,
        action=decided.proposal.action.action,
        valid=decided.valid,
        routing=decided.proposal.routing,
        decided_at=decided.created_at,
        outcome=ref.outcome,
        approved=approval.approved if approval is not None else None,
        approved_by=approval.by if approval is not None else None,
        signature=decided.inputs.failure_signature,
        entry=entry,
        # An entry the inputs do not show as learned is taken as written: never retired.
        learned=entry is not None and known is not None and known.entry == entry and known.learned,
    )
    return facts, decided


def _seen(store: PlaybookStore, record: RunRecord) -> tuple[set[int], set[str]]:
    """The run's verdicts some entry already holds an outcome of, and the retired entries:
    what a second call (a resume, the next stage) need not do again."""
    entries = store.entries(on_error=lambda _exc: None)
    agreed = {
        p.verdict
        for e in entries
        for p in e.provenance
        if p.run_id == record.run_id and p.verdict is not None
    }
    return agreed, {e.id for e in entries if e.status is EntryStatus.RETIRED}


def learn(record: RunRecord, services: Services) -> None:
    """Propose what the run's decisions proved right, retire the learned entries whose
    decision failed verification. Never raises for a file it cannot read: it says so."""
    refs = [
        v
        for v in record.verdicts
        if v.outcome is not None and not v.model_unavailable and v.action not in NEVER_LEARNED
    ]
    if not refs:
        return
    gathered: dict[int, tuple[DecisionFacts, VerdictRecord]] = {}
    for ref in refs:
        try:
            found = _facts(record, ref, services)
        except (StateError, ConfigError, OSError) as exc:
            services.reporter.note(f"playbook: verdict {ref.number} not learned from: {exc}")
            continue
        if found is not None:
            gathered[ref.number] = found
    todo = lessons((f for f, _ in gathered.values()), record.attempts, record.resumes)
    if not todo:
        return
    store = store_for(services.loaded.root)
    agreed, retired = _seen(store, record)
    for lesson in todo:
        try:
            if lesson.do == "propose" and lesson.verdict not in agreed:
                _propose(store, record, lesson, *gathered[lesson.verdict], services)
            elif lesson.do == "retire" and lesson.entry is not None and lesson.entry not in retired:
                facts, decided = gathered[lesson.verdict]
                provenance = _provenance(record, lesson, facts, decided, services.clock())
                _retire(store, lesson, lesson.entry, provenance, services)
                retired.add(lesson.entry)
        except OSError as exc:  # the playbook's directory or lock: told, the run goes on
            services.reporter.note(f"playbook: verdict {lesson.verdict} not learned from: {exc}")


def _provenance(
    record: RunRecord, lesson: Lesson, facts: DecisionFacts, decided: VerdictRecord, at: datetime
) -> Provenance:
    """The decision's line in an entry's provenance (or in its retirement's ledger row)."""
    return Provenance(
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        verdict=facts.number,
        decision_id=decided.decision_id,
        source=facts.source,
        approved_by=facts.approved_by,
        outcome=lesson.why,
        at=at,
    )


def _propose(
    store: PlaybookStore,
    record: RunRecord,
    lesson: Lesson,
    facts: DecisionFacts,
    decided: VerdictRecord,
    services: Services,
) -> None:
    signature = facts.signature
    assert signature is not None  # a proposal is only a lesson of a decision with one
    verdict = decided.proposal.action
    # The decision as it was carried out: the validated verdict object, which the entry's
    # next use validates again exactly as a model's reply is.
    decision = verdict.model_dump(mode="json")
    provenance = _provenance(record, lesson, facts, decided, services.clock())
    summary = getattr(verdict, "summary", "") or ""
    where = f"{facts.check or facts.stage} ({signature.failure_class})"
    entry = propose(
        store,
        signature=signature,
        decision=decision,
        provenance=provenance,
        description=f"{facts.action} for {where}: {summary}".strip().rstrip(":"),
        promote_after=promote_after_of(services.loaded.config),
        ledger=LedgerLink.for_services(services).ledger,
    )
    if entry is None:
        services.reporter.note(
            f"playbook: verdict {facts.number} proved right ({lesson.why}); not proposed: "
            "an entry for the same failure decides otherwise or was retired"
        )
        return
    services.reporter.note(
        f"playbook: verdict {facts.number} proved right ({lesson.why}): entry {entry.id} "
        f"{entry.status} with {entry.agreeing} agreeing outcome(s) "
        f"(`orchestrator playbook show {entry.id}`)"
    )


def _retire(
    store: PlaybookStore,
    lesson: Lesson,
    entry_id: str,
    provenance: Provenance,
    services: Services,
) -> None:
    reason = f"{lesson.why} (run {provenance.run_id}, verdict {lesson.verdict})"
    try:
        retire(
            store,
            entry_id,
            reason=reason,
            at=provenance.at,
            ledger=LedgerLink.for_services(services).ledger,
            provenance=provenance,
        )
    except (UsageError, ConfigError) as exc:  # removed or broken by hand meanwhile
        services.reporter.note(f"playbook: entry {entry_id} not retired: {exc}")
        return
    services.reporter.note(
        f"playbook: entry {entry_id} retired: its decision failed verification ({reason}); "
        "the next decision about this failure asks the model"
    )
