"""The playbook that learns (issue 44), as the run loop and the ``playbook`` command use it:

* ``load_playbook``: the promoted entries, indexed, for the decision about a failure;
* ``propose``: a decision about a failure proved right (an infrastructure retry that
  turned green, a mechanical fix whose verification went green, a decision a person
  approved that then went green): the same decision is proposed for the failure's
  signature, or, when an entry with the same signature and decision is there, its
  provenance grows by one agreeing outcome (and it is promoted when the config allows
  promotion after that many: ``promote_after_of``);
* ``retire``: a learned entry whose decision failed verification decides nothing more;
* ``promote``: a person's word (the command, or a comment where approvals by comment
  are on).

Every change is one whole-file write under the playbook's lock (``storage.playbook``).
Given a ``ledger``, each event (proposed, agreed, promoted, retired) is first appended to
it as a ``playbook`` row (``event_row``): the entry, the event, its signature key, the
decision's action, the run and verdict, who approved or promoted it and why it was
retired. The row is keyed by the entry's revision, so an event cut short between its row
and its file and done again finds its row instead of appending a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from orchestrator.domain.config import Config
from orchestrator.domain.errors import ConfigError, UsageError
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.playbook import (
    SUFFIX,
    EntryStatus,
    Match,
    PlaybookEntry,
    Provenance,
    entry_id_for,
)
from orchestrator.recovery.playbook import Playbook
from orchestrator.redaction import scrub
from orchestrator.storage import DecisionLedger
from orchestrator.storage.ledger import LedgerRow, inputs_hash
from orchestrator.storage.playbook import LazyEntries, PlaybookStore, builtin_entries

CAPABILITY: Final = "playbook"
KIND: Final = "playbook"
EVENTS: Final = ("proposed", "agreed", "promoted", "retired")
MAX_WHO_CHARS: Final = 200
MAX_REASON_CHARS: Final = 1000


def store_for(config_root: Path) -> PlaybookStore:
    """The playbook of the project whose config.toml is in ``config_root``."""
    return PlaybookStore(config_root)


def promote_after_of(config: Config) -> int | None:
    """``[playbook] promote_after`` as ``propose`` takes it: None when only a person
    promotes (0, the default), else how many agreeing outcomes promote an entry."""
    return config.playbook.promote_after or None


def load_playbook(store: PlaybookStore, note: Callable[[str], None]) -> Playbook:
    """The promoted entries, indexed. A file that is not an entry is reported through
    ``note`` (by name, with its bad key) and left out: the run goes on without it.

    A signature entry is read from its file only when a failure's key names it
    (``storage.playbook.LazyEntries``): a decision stats the playbook's files and reads
    its index, not a thousand TOML files. Pattern entries, few and written by people, are
    read now."""

    def report(exc: ConfigError) -> None:
        note(f"playbook: {exc}")

    index = store.index(on_error=report)
    read_now: list[PlaybookEntry] = []
    for name in index.patterns:
        try:
            entry = store.read_current(name)
        except ConfigError as exc:
            report(exc)
            continue
        if entry is not None:
            read_now.append(entry)
    read_now += [e for e in builtin_entries() if f"{e.id}{SUFFIX}" not in index.files]
    eager = Playbook.of(read_now)
    return Playbook(LazyEntries(store, index.decide, eager.by_key, report), eager.by_check)


def _same_decision(a: dict[str, object], b: dict[str, object]) -> bool:
    """Two decisions agree when they would do the same: the same action and, for a
    mechanical fix, the same plan (a summary's wording does not matter)."""
    return a.get("action") == b.get("action") and a.get("repair_plan") == b.get("repair_plan")


def _one_line(text: str, limit: int) -> str:
    """What a person typed as it is recorded: one line, secrets and personal data out."""
    return scrub(" ".join(text.split()))[0][:limit]


def event_decision_id(entry: PlaybookEntry, event: str) -> str:
    """The ledger key of one event of an entry: ``playbook:<entry>:<event>:<revision>``."""
    return f"playbook:{entry.id}:{event}:{entry.revision}"


def event_row(
    entry: PlaybookEntry,
    event: str,
    *,
    at: datetime,
    by: str | None = None,
    reason: str | None = None,
    provenance: Provenance | None = None,
    comment_url: str | None = None,
) -> LedgerRow:
    """The ledger row of ``event`` (one of ``EVENTS``) of ``entry`` as it is after it.
    ``provenance``: the proven outcome the event is about (the one that proposed or
    agreed; a retirement's failed run), else the entry's latest. ``by``: who promoted or
    retired it (a person, ``github:<login>``, ``auto: N agreeing outcomes``); None for the
    orchestrator's own retirement after a failed verification. No secret reaches it: the
    signature lines are redacted before they are masked, and what a person typed is
    scrubbed here."""
    if event not in EVENTS:
        raise ValueError(f"not a playbook event: {event!r}")
    about = provenance or (entry.provenance[-1] if entry.provenance else None)
    person = by is not None and not by.startswith("auto:")
    if event == "promoted":
        said = f"promoted by {by}"
    elif event == "retired":
        said = f"retired: {reason}" if reason else "retired"
    elif event == "agreed":
        said = f"agreed: {entry.agreeing} agreeing outcomes"
    else:
        said = "proposed"
    decision = {
        "event": event,
        "entry": entry.id,
        "status": entry.status.value,
        "revision": entry.revision,
        "signature_key": entry.match.signature_key(),
        "stage": entry.match.stage,
        "check": entry.match.check,
        "failure_class": entry.match.failure_class,
        "action": str(entry.decision.get("action", "")),
        "agreeing": entry.agreeing,
        "verdict": about.verdict if about is not None else None,
        "decided_by": about.source if about is not None else None,
        "approved_by": about.approved_by if about is not None else None,
        "by": by,
        "reason": reason,
        "comment_url": comment_url,
    }
    return LedgerRow(
        kind=KIND,
        decision_id=event_decision_id(entry, event),
        ticket=(about.ticket_id or "") if about is not None else "",
        run=about.run_id if about is not None else "",
        capability=CAPABILITY,
        inputs_hash=inputs_hash(entry.match.model_dump(mode="json")),
        model_version=None,
        prompt_version=None,
        source="human" if person else "playbook",
        decision=decision,
        outcome=said,
        ts=at.astimezone(UTC).isoformat(),
    )


def _record(ledger: DecisionLedger | None, rows: Sequence[LedgerRow]) -> None:
    """Append each row unless an earlier, cut-short attempt at the same event did."""
    if ledger is None:
        return
    for row in rows:
        if not any(r.get("kind") == KIND for r in ledger.rows_of(row.decision_id)):
            ledger.append(row)


def _with_key(store: PlaybookStore, key: str) -> PlaybookEntry | None:
    """The entry whose signature's key is ``key`` (the first, in name order), found
    through the index; a file that is not an entry is passed over (``load_playbook``
    reports it)."""
    name = store.index(on_error=lambda _exc: None).with_key(key)
    if name is not None:
        with suppress(ConfigError):
            entry = store.read_current(name)
            if entry is not None and entry.match.signature_key() == key:
                return entry
    return next((e for e in builtin_entries() if e.match.signature_key() == key), None)


def propose(
    store: PlaybookStore,
    *,
    signature: FailureSignature,
    decision: dict[str, object],
    provenance: Provenance,
    description: str,
    promote_after: int | None = None,
    ledger: DecisionLedger | None = None,
) -> PlaybookEntry | None:
    """Propose ``decision`` for failures with ``signature``, or add one agreeing outcome to
    the entry that proposes it already (promoting it once ``promote_after`` outcomes agree,
    when that is set). None when nothing is learned: the signature has no deciding line,
    or an entry for the same signature decides otherwise (a person settles that), or the
    entry was retired (its decision failed once: agreeing outcomes do not revive it).
    Given ``ledger``, each event's row is appended before the file is written."""
    if signature.empty:
        return None
    action = str(decision.get("action", ""))
    with store.locked():
        existing = _with_key(store, signature.key)
        rows: list[LedgerRow] = []
        if existing is not None:
            if existing.status is EntryStatus.RETIRED or not _same_decision(
                existing.decision, decision
            ):
                return None
            entry = existing.agreed(provenance)
            if entry is not existing:
                rows.append(event_row(entry, "agreed", at=provenance.at, provenance=provenance))
        else:
            entry = PlaybookEntry(
                id=entry_id_for(signature, action),
                description=description[:2000],
                match=Match(
                    stage=signature.stage,
                    check=signature.check,
                    failure_class=signature.failure_class,
                    signature=signature.lines,
                ),
                decision=dict(decision),
                provenance=(provenance,),
                revision=1,
            )
            rows.append(event_row(entry, "proposed", at=provenance.at, provenance=provenance))
        if (
            entry.status is EntryStatus.PROPOSED
            and promote_after is not None
            and entry.agreeing >= promote_after
        ):
            by = f"auto: {entry.agreeing} agreeing outcomes"
            entry = entry.promoted(by=by, at=provenance.at)
            rows.append(event_row(entry, "promoted", at=provenance.at, by=by))
        if entry != existing:
            _record(ledger, rows)
            store.write(entry)
        return entry


def get_entry(store: PlaybookStore, entry_id: str) -> PlaybookEntry:
    """The entry with this id. Raises UsageError naming the playbook's directory when
    there is none; ConfigError (its path and bad key) when its file is not an entry."""
    entry = store.get(entry_id)
    if entry is None:
        raise UsageError(f"playbook: no entry {entry_id!r} in {store.dir} (nor built in)")
    return entry


def retire(
    store: PlaybookStore,
    entry_id: str,
    *,
    reason: str,
    at: datetime,
    ledger: DecisionLedger | None = None,
    by: str | None = None,
    provenance: Provenance | None = None,
) -> PlaybookEntry:
    """Retire the entry: it decides nothing more. Raises UsageError for no such entry.
    ``by``: the person who retired it (None: the orchestrator, after its decision failed
    verification); ``provenance``: that failed run, for the ledger row."""
    with store.locked():
        entry = get_entry(store, entry_id)
        if entry.status is EntryStatus.RETIRED:
            return entry
        why = _one_line(reason, MAX_REASON_CHARS)
        who = _one_line(by, MAX_WHO_CHARS) if by is not None else None
        retired = entry.retired(reason=why, at=at)
        _record(
            ledger,
            [event_row(retired, "retired", at=at, by=who, reason=why, provenance=provenance)],
        )
        store.write(retired)
        return retired


def promote(
    store: PlaybookStore,
    entry_id: str,
    *,
    by: str,
    at: datetime,
    ledger: DecisionLedger | None = None,
    comment_url: str | None = None,
) -> PlaybookEntry:
    """Promote the entry: it decides the next matching failure with no model call. Raises
    UsageError for no such entry; ConfigError for a file that is not an entry.
    ``comment_url``: the comment a person promoted it by, for the ledger row."""
    with store.locked():
        entry = get_entry(store, entry_id)
        if entry.status is EntryStatus.PROMOTED:
            return entry
        who = _one_line(by, MAX_WHO_CHARS) or "unknown"
        promoted = entry.promoted(by=who, at=at)
        _record(ledger, [event_row(promoted, "promoted", at=at, by=who, comment_url=comment_url)])
        store.write(promoted)
        return promoted


__all__ = [
    "event_row",
    "get_entry",
    "load_playbook",
    "promote",
    "promote_after_of",
    "propose",
    "retire",
    "store_for",
]
