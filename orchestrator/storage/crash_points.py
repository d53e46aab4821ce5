"""Named crash points: every place a run persists something, and a hook that kills the
process right after one of them, for the tests that prove a run resumes from each.

Off in production: ``crash_point(name)`` does nothing unless ``$ORCHESTRATOR_CRASH_AT``
names that point, as ``NAME`` (its first hit) or ``NAME:N`` (its N-th hit in this
process). Then the process sends itself SIGKILL: no handler, no ``finally``, no flush
runs — exactly what the OOM killer or a power cut leaves. Nothing in the project sets
the variable; a test sets it for one orchestrator process.

The names are a closed set (``CrashPoint``); each is called right after its write is
durable, so "killed at X" means "X is on disk, nothing after it is".
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import Final

CRASH_ENV: Final = "ORCHESTRATOR_CRASH_AT"


class CrashPoint(StrEnum):
    """Every persistence point of a run (and of a person's resume or reset), in the
    order a run meets them."""

    RUN_CREATED = "run-created"  # the run record, first written
    RUN_STARTED = "run-started"  # the record moved to running
    BASE_CHECK = "base-check"  # a review check's result on the base commit (a cache)
    ATTEMPT_STARTED = "attempt-started"  # an attempt recorded as running
    ATTEMPT_GROUP = "attempt-group"  # its process group's identity recorded
    ATTEMPT_FINISHED = "attempt-finished"  # its result recorded
    ATTEMPT_INTERRUPTED = "attempt-interrupted"  # a dead or stopped attempt settled
    RECOVERING = "recovering"  # the record moved to recovering
    BUNDLE = "bundle"  # the evidence bundle a decision is taken on
    DIAGNOSIS_CHARGE = "diagnosis-charge"  # a model call charged to the ticket, before it
    BATCH_BUDGET = "batch-budget"  # the batch's shared model budget updated
    MODEL_REPLY = "model-reply"  # a call's reply, journaled as it arrives
    REPLY_TEXTS = "reply-texts"  # the call transcript's texts
    VERDICT = "verdict"  # the verdict file: the decision
    LEDGER_TRACE = "ledger-trace"  # an investigation step's ledger row
    LEDGER_DECISION = "ledger-decision"  # a decision's ledger row (or a resume's, a reset's)
    VERDICT_REF = "verdict-ref"  # the run record pointing at the verdict
    AWAITING_APPROVAL = "awaiting-approval"  # the record waiting for a person
    APPROVAL = "approval"  # the answer (automatic or a person's)
    RETRY_CHARGE = "retry-charge"  # a re-run charged to the ticket, before it
    FIX_REPORT = "fix-report"  # a mechanical fix's report: its plan, then its result
    HANDOFF = "hand-off"  # the hand-off a person gets
    SUB_TICKET = "sub-ticket"  # one split sub-ticket, beside its parent
    LEDGER_OUTCOME = "ledger-outcome"  # the outcome's ledger row
    OUTCOME = "outcome"  # the run record with the outcome and the state it led to
    RUN_ENDED = "run-ended"  # the record's last transition (completed, failed, blocked)
    RESUMED = "resumed"  # a person's resume, on the run record (after its ledger row)
    CAPS_RESET = "caps-reset"  # a person's reset of the ticket's caps (after its ledger row)
    TEMP_FILE = "temp-file"  # mid atomic write: the temp file is full, not yet renamed


# The writes that persist a fact of this machine alone, kept out of a shared record
# (``[storage] url``): a stage's process group is this machine's pid space, and read on
# another machine it names somebody else's processes. A run that dies mid-stage is
# settled there by the attempt's environment marker instead (``driver._kill_leftovers``).
MACHINE_LOCAL: Final = frozenset({CrashPoint.ATTEMPT_GROUP})


_hits: Counter[str] = Counter()


def armed(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """The point (and which of its hits) ``environ`` arms, or None. An unknown name is
    an error: a test that names a point that does not exist would otherwise pass by
    never crashing."""
    spec = environ.get(CRASH_ENV)
    if not spec:
        return None
    name, _, count = spec.partition(":")
    if name not in CrashPoint.__members__.values():
        raise ValueError(f"{CRASH_ENV}={spec!r}: no crash point {name!r}")
    try:
        hit = int(count) if count else 1
    except ValueError:
        raise ValueError(f"{CRASH_ENV}={spec!r}: {count!r} is not a number") from None
    return name, hit


def crash_point(point: CrashPoint, environ: Mapping[str, str] = os.environ) -> None:
    """Called right after a write is durable; kills this process if the write is the one
    ``$ORCHESTRATOR_CRASH_AT`` names (one dict look-up otherwise)."""
    if CRASH_ENV not in environ:
        return
    target = armed(environ)
    if target is None:
        return
    _hits[point.value] += 1
    if target == (point.value, _hits[point.value]):
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["CRASH_ENV", "CrashPoint", "armed", "crash_point"]
