"""The playbook that learns (issue 44), as the run loop and the ``playbook`` command use it:

* ``load_playbook``: the promoted entries, indexed, for the decision about a failure;
* ``propose``: a decision about a failure proved right (an infrastructure retry that
  turned green, a mechanical fix whose verification went green, a decision a person
  approved that then went green): the same decision is proposed for the failure's
  signature, or, when an entry with the same signature and decision is there, its
  provenance grows by one agreeing outcome (and it is promoted when the config allows
  promotion after that many);
* ``retire``: a learned entry whose decision failed verification decides nothing more;
* ``promote``: a person's word (the command, or a comment where approvals by comment
  are on).

Every change is one whole-file write under the playbook's lock (``storage.playbook``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from orchestrator.domain.errors import UsageError
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.playbook import (
    EntryStatus,
    Match,
    PlaybookEntry,
    Provenance,
    entry_id_for,
)
from orchestrator.recovery.playbook import Playbook
from orchestrator.storage.playbook import PlaybookStore


def store_for(config_root: Path) -> PlaybookStore:
    """The playbook of the project whose config.toml is in ``config_root``."""
    return PlaybookStore(config_root)


def load_playbook(store: PlaybookStore, note: Callable[[str], None]) -> Playbook:
    """The promoted entries, indexed. A file that is not an entry is reported through
    ``note`` (by name, with its bad key) and left out: the run goes on without it."""
    return Playbook.of(store.entries(on_error=lambda exc: note(f"playbook: {exc}")))


def _same_decision(a: dict[str, object], b: dict[str, object]) -> bool:
    """Two decisions agree when they would do the same: the same action and, for a
    mechanical fix, the same plan (a summary's wording does not matter)."""
    return a.get("action") == b.get("action") and a.get("repair_plan") == b.get("repair_plan")


def propose(
    store: PlaybookStore,
    *,
    signature: FailureSignature,
    decision: dict[str, object],
    provenance: Provenance,
    description: str,
    promote_after: int | None = None,
) -> PlaybookEntry | None:
    """Propose ``decision`` for failures with ``signature``, or add one agreeing outcome to
    the entry that proposes it already (promoting it once ``promote_after`` outcomes agree,
    when that is set). None when nothing is learned: the signature has no deciding line,
    or an entry for the same signature decides otherwise (a person settles that), or the
    entry was retired (its decision failed once: agreeing outcomes do not revive it)."""
    if signature.empty:
        return None
    action = str(decision.get("action", ""))
    with store.locked():
        existing = next(
            (
                e
                for e in store.entries(on_error=lambda _exc: None)
                if e.match.signature_key() == signature.key
            ),
            None,
        )
        if existing is not None:
            if existing.status is EntryStatus.RETIRED or not _same_decision(
                existing.decision, decision
            ):
                return None
            entry = existing.agreed(provenance)
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
            )
        if (
            entry.status is EntryStatus.PROPOSED
            and promote_after is not None
            and entry.agreeing >= promote_after
        ):
            entry = entry.promoted(by=f"auto: {entry.agreeing} agreeing outcomes", at=provenance.at)
        if entry != existing:
            store.write(entry)
        return entry


def retire(store: PlaybookStore, entry_id: str, *, reason: str, at: datetime) -> PlaybookEntry:
    """Retire the entry: it decides nothing more. Raises UsageError for no such entry."""
    with store.locked():
        entry = store.get(entry_id)
        if entry is None:
            raise UsageError(f"playbook: no entry {entry_id!r} in {store.dir}")
        if entry.status is EntryStatus.RETIRED:
            return entry
        retired = entry.retired(reason=reason[:2000], at=at)
        store.write(retired)
        return retired


def promote(store: PlaybookStore, entry_id: str, *, by: str, at: datetime) -> PlaybookEntry:
    """Promote the entry: it decides the next matching failure with no model call. Raises
    UsageError for no such entry; ConfigError for a file that is not an entry."""
    with store.locked():
        entry = store.get(entry_id)
        if entry is None:
            raise UsageError(f"playbook: no entry {entry_id!r} in {store.dir}")
        if entry.status is EntryStatus.PROMOTED:
            return entry
        promoted = entry.promoted(by=by, at=at)
        store.write(promoted)
        return promoted


__all__ = ["load_playbook", "promote", "propose", "retire", "store_for"]
