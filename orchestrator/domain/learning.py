"""When a decision about a failure proved right, and when a learned playbook entry's
decision failed verification (issue 44): the rules of the playbook's learning, pure.

A decision **proves right** ("went green") when what it did is verified by the check that
failed, in the same run:

* ``mechanical-fix``: its own verification, the original failing check run on a clean
  checkout of the committed result (``actions/mechanical_fix.py``): the outcome
  ``mechanical-fix green: ...``. Red (``mechanical-fix red ...``) is a failed verification.
* ``retry``, ``escalate-model``, ``switch-engine`` (each re-runs the code stage and every
  stage after it): the failing stage's next finished attempt in the run passes (so its
  failing check is green). The stage failing again, for a code reason, is a failed
  verification. An attempt that failed for an infrastructure reason (the network, a rate
  limit) says nothing about the decision: the attempt after it judges it. An attempt
  interrupted by a kill is not finished: it is run again, and that one judges.

Never learned from: a decision not carried out yet, or refused; an invalid verdict (its
abandon-human stood in for it); ``abandon-human`` and ``split`` (they end the ticket:
nothing is verified); a decision routed ``reject`` or rejected by a person (what ran was
not it); a decision whose failure has no deciding line (``FailureSignature.empty``:
nothing would tell the next failure of that check from another); one made by a written
(pattern) entry (a person wrote it: it is not the run's to learn or to retire); and a
re-run whose run a person resumed between the decision and the attempt that would judge
it (``orchestrator resume``: they may have changed the clone, the config or the machine,
so the green is not the decision's; nor is the red).

A decision made by a learned entry that proves right adds its outcome to the entry (the
same proposal agrees); one that fails verification retires the entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Final, Literal

from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.runs import Attempt, AttemptStatus, ResumeRecord
from orchestrator.domain.validation import Frozen

# The actions whose proof is the failing stage passing when it runs again.
RERUN_ACTIONS: Final = frozenset({"retry", "escalate-model", "switch-engine"})
MECHANICAL_FIX: Final = "mechanical-fix"
# They end the ticket: nothing runs that could verify them.
NEVER_LEARNED: Final = frozenset({"abandon-human", "split"})
GREEN: Final = "mechanical-fix green"
RED: Final = "mechanical-fix red"


class Judged(StrEnum):
    PROVED = "proved"  # it went green: a proposal (or one more agreeing outcome)
    FAILED = "failed"  # its verification failed: a learned entry that made it is retired
    OPEN = "open"  # not known yet: not carried out, or the stage has not run again
    NOT_LEARNED = "not-learned"  # never a lesson, whatever comes of it (``why`` says)


class DecisionFacts(Frozen):
    """What the rules need of one decision of a run, gathered from its verdict file, its
    reference on the run record and its approval (``app/learning.py``)."""

    number: int  # the run's verdict number
    attempt: int  # the failed attempt it is about
    stage: str
    check: str | None = None
    source: str  # model | playbook | infra | synthetic
    action: str
    valid: bool
    routing: str
    decided_at: datetime
    # What came of carrying it out (``VerdictRef.outcome``); None: not carried out yet.
    outcome: str | None = None
    # None: the approval is not there, or it does not verify (nothing learned from it).
    approved: bool | None = None
    approved_by: str | None = None
    signature: FailureSignature | None = None
    # The playbook entry that made it, and whether that entry was learned (a signature
    # entry) or written by a person (a pattern entry).
    entry: str | None = None
    learned: bool = False


class Judgement(Frozen):
    verdict: int
    judged: Judged
    why: str  # the outcome that proved it, why it failed, or why it is never learned


class Lesson(Frozen):
    """What the run does about one judged decision: propose its decision for its failure's
    signature (or agree with the learned entry that made it), or retire that entry."""

    verdict: int
    do: Literal["propose", "retire"]
    why: str
    entry: str | None = None  # the learned entry to retire


def _rerun_judgement(
    decision: DecisionFacts, attempts: Sequence[Attempt], resumes: Sequence[ResumeRecord]
) -> Judgement:
    def judged(how: Judged, why: str) -> Judgement:
        return Judgement(verdict=decision.number, judged=how, why=why)

    for attempt in attempts:
        if attempt.number <= decision.attempt or attempt.stage != decision.stage:
            continue
        if attempt.status is not AttemptStatus.FINISHED:
            continue  # interrupted: it runs again, and that attempt judges
        between = (r for r in resumes if decision.decided_at <= r.at <= attempt.started_at)
        if (resumed := next(between, None)) is not None:
            why = f"the run was resumed by {resumed.by} before {decision.stage!r} ran again"
            return judged(Judged.NOT_LEARNED, why)
        how, where = f"{decision.action} ", decision.check or decision.stage
        if attempt.ok:
            return judged(Judged.PROVED, f"{how}green: {where} passes (attempt {attempt.number})")
        if attempt.failure_class not in (None, "code"):
            continue  # the infrastructure failed it: the next attempt judges the decision
        failing = attempt.failing_check.name if attempt.failing_check else decision.stage
        return judged(Judged.FAILED, f"{how}red: {failing} failed again (attempt {attempt.number})")
    return judged(Judged.OPEN, f"{decision.stage!r} has not run again since")


def judge(
    decision: DecisionFacts, attempts: Sequence[Attempt], resumes: Sequence[ResumeRecord] = ()
) -> Judgement:
    """Whether ``decision`` proved right, failed verification, is not known yet, or is
    never learned from, given the run's ``attempts`` and a person's ``resumes``. Pure."""

    def never(why: str) -> Judgement:
        return Judgement(verdict=decision.number, judged=Judged.NOT_LEARNED, why=why)

    if decision.outcome is None:
        return Judgement(verdict=decision.number, judged=Judged.OPEN, why="not carried out yet")
    if not decision.valid:
        return never("an invalid verdict")
    if decision.action in NEVER_LEARNED or decision.source == "synthetic":
        return never(f"{decision.action} ends the ticket: nothing verifies it")
    if decision.routing == "reject":
        return never("routed reject: it did not run")
    if decision.approved is not True:
        return never("rejected" if decision.approved is False else "no verified approval")
    if decision.action == MECHANICAL_FIX:
        if decision.outcome.startswith(GREEN):
            return Judgement(verdict=decision.number, judged=Judged.PROVED, why=decision.outcome)
        if decision.outcome.startswith(RED):
            return Judgement(verdict=decision.number, judged=Judged.FAILED, why=decision.outcome)
        return never(f"its outcome says neither green nor red: {decision.outcome}")
    if decision.action in RERUN_ACTIONS:
        return _rerun_judgement(decision, attempts, resumes)
    return never(f"{decision.action} is not verified by a check")


def lesson_of(decision: DecisionFacts, judgement: Judgement) -> Lesson | None:
    """What is learned from ``decision`` judged so, or None. Pure."""
    if decision.entry is not None and not decision.learned:
        # A written (pattern) entry decided: a person wrote it, and a person retires it.
        # Its failure is not retired automatically, nor is its success learned again.
        return None
    if judgement.judged is Judged.PROVED:
        if decision.signature is None or decision.signature.empty:
            return None  # nothing would tell the next failure of this check from another
        return Lesson(verdict=decision.number, do="propose", why=judgement.why)
    if judgement.judged is Judged.FAILED and decision.entry is not None:
        return Lesson(verdict=decision.number, do="retire", why=judgement.why, entry=decision.entry)
    return None


def lessons(
    decisions: Iterable[DecisionFacts],
    attempts: Sequence[Attempt],
    resumes: Sequence[ResumeRecord] = (),
) -> tuple[Lesson, ...]:
    """The lessons of a run's decisions so far, in verdict order. Pure, and the same for
    the same run record: a resumed process learns the same again, and the playbook keeps
    each outcome once (by run and verdict)."""
    ordered = sorted(decisions, key=lambda d: d.number)
    found = (lesson_of(d, judge(d, attempts, resumes)) for d in ordered)
    return tuple(lesson for lesson in found if lesson is not None)


__all__ = [
    "DecisionFacts",
    "Judged",
    "Judgement",
    "Lesson",
    "judge",
    "lesson_of",
    "lessons",
]
