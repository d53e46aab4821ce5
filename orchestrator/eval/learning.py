"""The eval measured as learning (issue 44): the same corpus decided twice, the first
pass's proven decisions promoted into a playbook in between, the second pass's model calls
counted. The goal: on the second pass, no model call for a failure whose first-pass
decision proved right.

What "proved right" means here, with no run to verify anything:

* a deterministic decision (an infrastructure verdict, a playbook entry's) proved right
  when the label accepts its action. It needs no entry: an infrastructure failure is
  decided before the playbook is read (an entry for it would never be consulted), and a
  playbook entry decides again by itself;
* a model call's decision: offline there is no verdict, so it is taken as the one a model
  that was right would give, the label's first acceptable action that the run learns from
  and that needs no plan of its own (a re-run: ``retry``, ``escalate-model``,
  ``switch-engine``; a ``mechanical-fix`` is a plan only a model writes). Offline the
  second pass therefore measures whether the signature finds the same failure again and
  the playbook decides it without a call, not whether the model was right. With
  ``--live`` the model's own verdict is proposed, and only when the label accepts its
  action;
* as in the run (``domain.learning``), a model's ``abandon-human`` or ``split`` is never
  proven: it ends the ticket and nothing verifies it. A failure whose label accepts only
  a person (a configuration error read as the code's) is asked about again.

The proven decisions are learned through the run's own entry path: ``app.playbook.propose``
then ``promote`` into a ``PlaybookStore`` in a temporary directory (removed once every pass
is done: the playbook reads an entry's file when a failure's key names it), read back with
``load_playbook``, so the second pass goes through the same files, parser
and index as a run. Each failure is then decided again by ``offline.decide`` (the same
match and precheck as the first pass and the run loop) with that playbook.

Two more measures: the **cross pass** (entries learned from the logs as found, matched
against the same failures padded: a fresh log buries its failure in other output, and the
signature must not change) and **cross-case matches** (a learned entry that decides a
failure other than those it was learned from: a signature that finds another failure
would decide it wrongly, unless the decision fits that one too).

Pure apart from the temporary playbook directory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

from orchestrator.app.playbook import load_playbook, promote, propose
from orchestrator.domain.learning import NEVER_LEARNED, RERUN_ACTIONS
from orchestrator.domain.playbook import Provenance
from orchestrator.domain.validation import Frozen
from orchestrator.eval import layers
from orchestrator.eval.corpus import Case, CaseLabel
from orchestrator.eval.live import LiveSummary
from orchestrator.eval.offline import CaseResult, redecided
from orchestrator.recovery.playbook import Playbook
from orchestrator.storage.playbook import PlaybookStore

RUN_ID: Final = "orchestrator-eval"
APPROVED_BY: Final = "orchestrator eval"
# A fixed time: the same corpus writes the same entries.
AT: Final = datetime(2026, 1, 1, tzinfo=UTC)
# The actions a stand-in for a right model's verdict can take: those the run learns from
# (a re-run proves right when the stage passes) that need no plan of their own.
STAND_IN_ACTIONS: Final = tuple(a for a in ("retry", "escalate-model", "switch-engine")
                                if a in RERUN_ACTIONS)  # fmt: skip
_SUMMARY: Final = "the decision a right model would give (orchestrator eval, offline)"


class ModelVerdict(Frozen):
    """What the live model answered about one case: its action, its verdict object (None
    for a reply that was not a valid verdict) and whether the label accepts it."""

    action: str
    verdict: dict[str, Any] | None = None
    acceptable: bool


def verdicts_of(live: LiveSummary) -> dict[str, ModelVerdict]:
    """What the live model answered, by case."""
    return {
        r.id: ModelVerdict(action=r.action, verdict=r.verdict, acceptable=r.agreed)
        for r in live.results
    }


class Proof(Frozen):
    """One first-pass decision, judged: proven or not, and what was learned from it."""

    id: str
    source: str  # model | infra | playbook | synthetic
    proven: bool
    # The decision proposed for its signature (a proven model decision), else None.
    decision: dict[str, Any] | None = None
    # The entry it was proposed as or agreed with; None with ``why`` when none.
    entry: str | None = None
    why: str = ""


class PassFigures(Frozen):
    """One pass over the corpus: who decided, and what the model calls would cost."""

    name: str
    cases: int
    class_right: int
    root_cause_in_bundle: int
    calls: int
    calls_warranted: int
    calls_unwarranted: int
    decided_by_playbook: int
    # Decisions a learned entry made that the label does not accept.
    playbook_not_acceptable: tuple[str, ...] = ()
    # The bundle tokens the model calls would be sent (bytes/4, summed over the calls).
    tokens: int


class CrossCase(Frozen):
    """A learned entry that decided a failure while it was learned from another one."""

    entry: str
    learned_from: tuple[str, ...]
    case: str
    padded: bool
    acceptable: bool  # the label of that case accepts the entry's action


class PassPair(Frozen):
    """A first pass, what was learned from it, and the second pass."""

    first: PassFigures
    second: PassFigures
    proofs: tuple[Proof, ...]
    entries_promoted: int
    # Proven first-pass failures the second pass still sends to the model (goal: none).
    second_calls_for_proven: tuple[str, ...]
    cross_case: tuple[CrossCase, ...]
    # Failures of the corpus with one signature, whoever decided them (a shared signature
    # only decides wrongly through a learned entry: ``cross_case``): "a (class), b (class)".
    shared_signatures: tuple[str, ...] = ()
    # What reading the temporary playbook back reported (a file it could not read).
    notes: tuple[str, ...] = ()

    @property
    def proven(self) -> tuple[Proof, ...]:
        return tuple(p for p in self.proofs if p.proven)


class Learning(Frozen):
    offline: bool  # True: model decisions were stood in for (no live verdicts)
    found: PassPair
    padded: PassPair | None = None
    # The padded logs decided with the entries learned from the logs as found.
    cross: PassFigures | None = None
    # Proven as-found failures learned as an entry, and of those the padded twins that
    # entry decided with no model call.
    cross_learned: int = 0
    cross_matched: int = 0
    # Cases whose signature is not the same padded as found (id: found → padded lines).
    signature_changed: tuple[str, ...] = ()
    cross_case_padded: tuple[CrossCase, ...] = ()


def stand_in(label: CaseLabel) -> dict[str, Any] | None:
    """The verdict a right model would give offline: the label's first acceptable action a
    stand-in can take (``STAND_IN_ACTIONS``), as a verdict object; None when every
    acceptable action needs a plan."""
    ctx = layers.decision_context(label)
    for action in label.acceptable_actions:
        if action not in STAND_IN_ACTIONS:
            continue
        verdict: dict[str, Any] = {"action": action, "summary": _SUMMARY}
        if action == "switch-engine":
            other = next((e for e in ctx.ladders if e != ctx.current_engine), None)
            if other is None:
                continue
            verdict["engine"] = other
        return verdict
    return None


def judge(result: CaseResult, label: CaseLabel, live: Mapping[str, ModelVerdict] | None) -> Proof:
    """Whether the first pass's decision about ``result`` proved right, and what decision
    to propose for its signature (a model's only: see the module's docstring)."""
    source = result.decided_by
    proof = partial(Proof, id=result.id, source=source)
    if not result.model_call_made:
        if not result.action_acceptable:
            return proof(proven=False, why=f"decided {result.action}: the label does not accept it")
        why = (
            "decided before the playbook is read: no entry needed"
            if source == "infra"
            else f"decided by playbook entry {result.playbook_entry!r} already"
        )
        return proof(proven=True, entry=result.playbook_entry, why=why)
    if live is not None:
        answer = live.get(result.id)
        if answer is None:
            return proof(proven=False, why="the model was not asked (the cost cap)")
        if answer.verdict is None:
            return proof(proven=False, why="the model's reply was not a valid verdict")
        if not answer.acceptable:
            why = f"the model answered {answer.action}: the label does not accept it"
            return proof(proven=False, why=why)
        if answer.action in NEVER_LEARNED:
            return proof(proven=False, why=_ends(answer.action))
        return proof(proven=True, decision=answer.verdict)
    verdict = stand_in(label)
    if verdict is None:
        ends = [a for a in label.acceptable_actions if a in NEVER_LEARNED]
        why = (
            _ends(ends[0])
            if ends and ends == list(label.acceptable_actions)
            else "every acceptable action the run learns from needs a plan only a model writes"
        )
        return proof(proven=False, why=why)
    return proof(proven=True, decision=verdict)


def _ends(action: str) -> str:
    return f"{action} ends the ticket: nothing verifies it, the run never learns it"


def learn(
    results: Sequence[CaseResult], proofs: Sequence[Proof], scratch: Path
) -> tuple[Playbook, tuple[Proof, ...], dict[str, tuple[str, ...]], int, tuple[str, ...]]:
    """Propose each proven model decision for its failure's signature, promote the entries
    (as a person would), and read the playbook back: the playbook, the proofs with their
    entries, each learned entry's cases, how many were promoted, what reading noted."""
    store = PlaybookStore(scratch)
    judged: list[Proof] = []
    for number, (result, proof) in enumerate(zip(results, proofs, strict=True), start=1):
        if not proof.proven or proof.decision is None:
            judged.append(proof)
            continue
        entry = propose(
            store,
            signature=result.failure_signature,
            decision=proof.decision,
            provenance=Provenance(
                run_id=RUN_ID,
                ticket_id=result.id,
                verdict=number,
                source=proof.source,
                approved_by=APPROVED_BY,
                outcome="the label accepts the decision",
                at=AT,
            ),
            description=f"learned by orchestrator eval from {result.id}",
        )
        if entry is None:
            why = (
                "its signature has no deciding line"
                if result.failure_signature.empty
                else "an entry for the same signature decides otherwise"
            )
            judged.append(proof.model_copy(update={"why": why}))
        else:
            judged.append(proof.model_copy(update={"entry": entry.id}))
    learned = {p.entry for p in judged if p.decision is not None and p.entry is not None}
    for entry_id in sorted(learned):
        promote(store, entry_id, by=APPROVED_BY, at=AT)
    notes: list[str] = []
    playbook = load_playbook(store, notes.append)
    learned_from = {
        e.id: tuple(p.ticket_id or "" for p in e.provenance)
        for e in store.entries(on_error=lambda _exc: None)
        if e.id in learned
    }
    return playbook, tuple(judged), learned_from, len(learned), tuple(notes)


def figures(name: str, results: Sequence[CaseResult], learned: Mapping[str, object]) -> PassFigures:
    """A pass's figures; ``learned``: the ids of the entries learned by the eval."""
    calls = [r for r in results if r.model_call_made]
    return PassFigures(
        name=name,
        cases=len(results),
        class_right=sum(r.class_correct for r in results),
        root_cause_in_bundle=sum(r.root_cause_in_bundle for r in results),
        calls=len(calls),
        calls_warranted=sum(r.model_call_warranted for r in calls),
        calls_unwarranted=sum(not r.model_call_warranted for r in calls),
        decided_by_playbook=sum(r.decided_by == "playbook" for r in results),
        playbook_not_acceptable=tuple(
            f"{r.id}: {r.playbook_entry} decided {r.action}"
            for r in results
            if r.playbook_entry in learned and not r.action_acceptable
        ),
        tokens=sum(r.bundle_tokens for r in calls),
    )


def _failure_id(result: CaseResult) -> str:
    """Which failure a result is: a padded twin of this project's corpus (``x-padded``) is
    the failure ``x`` buried in other output."""
    return result.id.removesuffix("-padded") if result.padded else result.id


def cross_cases(
    results: Sequence[CaseResult], learned_from: Mapping[str, tuple[str, ...]]
) -> tuple[CrossCase, ...]:
    """Each decision a learned entry made about a failure when the entry was learned from
    another failure too, or only: two failures with one signature. Where their decisions
    agreed the entry fits both (``acceptable``); where they did not, the second was not
    learned and the entry decides it wrongly."""
    found = []
    for r in results:
        if r.playbook_entry is None or r.playbook_entry not in learned_from:
            continue
        sources = learned_from[r.playbook_entry]
        if not {s.removesuffix("-padded") for s in sources} - {_failure_id(r)}:
            continue
        found.append(
            CrossCase(
                entry=r.playbook_entry,
                learned_from=sources,
                case=r.id,
                padded=r.padded,
                acceptable=bool(r.action_acceptable),
            )
        )
    return tuple(found)


def shared_signatures(results: Sequence[CaseResult]) -> tuple[str, ...]:
    """Each signature two or more failures of ``results`` have, as the failures (with
    their labelled class) that have it."""
    by_key: dict[str, dict[str, str]] = {}
    for r in results:
        if r.signature_key is not None:
            by_key.setdefault(r.signature_key, {}).setdefault(_failure_id(r), r.label_class)
    return tuple(
        ", ".join(f"{case} ({cls})" for case, cls in failures.items())
        for failures in by_key.values()
        if len(failures) > 1
    )


def two_passes(
    results: Sequence[CaseResult],
    labels: Mapping[str, CaseLabel],
    scratch: Path,
    *,
    name: str,
    live: Mapping[str, ModelVerdict] | None = None,
) -> tuple[PassPair, Playbook, dict[str, tuple[str, ...]]]:
    """Learn from the first pass ``results`` into a playbook under ``scratch`` and decide
    every failure again: the pair of passes, the learned playbook (which reads its entries
    from ``scratch`` when a failure's key names one: keep it until done) and each learned
    entry's cases."""
    proofs = [judge(r, labels[r.id], live) for r in results]
    playbook, judged, learned_from, promoted, notes = learn(results, proofs, scratch)
    second = tuple(redecided(r, labels[r.id], playbook) for r in results)
    proven = {p.id for p in judged if p.proven}
    pair = PassPair(
        first=figures(f"1st {name}", results, learned_from),
        second=figures(f"2nd {name}", second, learned_from),
        proofs=judged,
        entries_promoted=promoted,
        second_calls_for_proven=tuple(r.id for r in second if r.id in proven and r.model_call_made),
        cross_case=cross_cases(second, learned_from),
        shared_signatures=shared_signatures(results),
        notes=notes,
    )
    return pair, playbook, learned_from


def measure(
    cases: Sequence[Case],
    found: Sequence[CaseResult],
    padded: Sequence[CaseResult] = (),
    *,
    live: Mapping[str, ModelVerdict] | None = None,
) -> Learning:
    """The learning passes over the first pass's results: as found, and (given the padded
    first pass) padded, and the padded logs decided with what was learned as found. The
    playbooks are written in a temporary directory, removed once every pass is done."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-eval-playbook-") as scratch:
        return _measured(cases, found, padded, live, Path(scratch))


def _measured(
    cases: Sequence[Case],
    found: Sequence[CaseResult],
    padded: Sequence[CaseResult],
    live: Mapping[str, ModelVerdict] | None,
    scratch: Path,
) -> Learning:
    labels = {case.label.id: case.label for case in cases}
    pair, playbook, learned_from = two_passes(
        found, labels, scratch / "as-found", name="as found", live=live
    )
    if not padded:
        return Learning(offline=live is None, found=pair)
    padded_labels = {r.id: labels[r.id].model_copy(update={"padded": True}) for r in padded}
    padded_pair, _, _ = two_passes(
        padded, padded_labels, scratch / "padded", name="padded", live=live
    )
    cross = tuple(redecided(r, padded_labels[r.id], playbook) for r in padded)
    entry_of = {p.id: p.entry for p in pair.proofs if p.decision is not None and p.entry}
    as_found = {r.id: r for r in found}
    changed = tuple(
        f"{r.id}: {list(as_found[r.id].signature)} → {list(r.signature)}"
        for r in padded
        if r.id in as_found and as_found[r.id].signature_key != r.signature_key
    )
    return Learning(
        offline=live is None,
        found=pair,
        padded=padded_pair,
        cross=figures("padded, entries as found", cross, learned_from),
        cross_learned=sum(r.id in entry_of for r in cross),
        cross_matched=sum(
            r.id in entry_of and r.playbook_entry == entry_of[r.id] and not r.model_call_made
            for r in cross
        ),
        signature_changed=changed,
        cross_case_padded=cross_cases(cross, learned_from),
    )
