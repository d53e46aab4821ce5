"""The ticket state machine (the governor): states, a transition table frozen at import
time, terminal states with no way out, and typed halt reasons. Pure: no I/O.

    pending ──► running ──► completed
                  │  ▲
                  ▼  │
               recovering ◄─► awaiting-approval
                  │  │
                  │  └──► waiting-infra ──► running (the next batch) | needs-human (too old)
                  └──► needs-human | failed | split        (terminal, like completed)

``waiting-infra`` is a waiting state, not an end (issue 43): the forge, the model
provider or the network stayed down through the in-batch back-off, so the run waits for
the next batch, which goes on from the failed stage — or, once the outage is older than
``[recovery] infra_wait_max_h``, stops it ``needs-human`` (``infra_wait_expired``) and a
person is told. Moving there needs a halt reason (``infra_unavailable``: which stage,
what failed), as a halt does.

A move that the table does not list raises ``IllegalTransition``; nothing leaves a
terminal state by itself. Every halt into ``needs-human`` or ``failed`` carries a
``HaltReason``.

One more way out, and only a person takes it: ``orchestrator resume`` moves a stopped run
back to ``running`` (``RESUMES``, frozen like the table above), once the cause is fixed.
``completed`` and ``split`` never resume (the work is done, or handed to sub-tickets), nor
a run a person ended by rejecting its proposal (``human_rejected``): that was a decision
about the run, which a new run revisits.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from orchestrator.domain.errors import IllegalTransition


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    RECOVERING = "recovering"
    AWAITING_APPROVAL = "awaiting-approval"
    WAITING_INFRA = "waiting-infra"  # an outage outlasted the back-off: the next batch goes on
    COMPLETED = "completed"
    NEEDS_HUMAN = "needs-human"
    FAILED = "failed"
    SPLIT = "split"


class HaltReason(StrEnum):
    STAGE_FAILED = "stage_failed"
    TIMED_OUT = "timed_out"
    CHECK_FAILED = "check_failed"
    CAP_EXHAUSTED = "cap_exhausted"
    INVALID_VERDICT = "invalid_verdict"
    DRY_RUN_BLOCK = "dry_run_block"
    PRECONDITION_FAILED = "precondition_failed"
    HUMAN_REJECTED = "human_rejected"
    ABANDONED = "abandoned"  # a verdict (model or playbook) said: get a human
    NO_MODEL = "no_model"  # diagnosis needed, but no model is configured
    MODEL_ERROR = "model_error"  # the model call failed: timeout, refusal, API error
    BUDGET_SPENT = "budget_spent"  # the batch's model budget is spent
    AUTH_ERROR = "auth_error"  # an engine or forge refused our credentials
    QUOTA_EXHAUSTED = "quota_exhausted"  # an engine's provider quota or credit is used up
    CONFIG_ERROR = "config_error"  # a stage's program is not installed: fix, then resume
    RESOURCE_EXHAUSTED = "resource_exhausted"  # disk, quota or memory ran out: free, resume
    # An approval that does not verify (HMAC, verdict digest, or there before a person was
    # asked): refused, and nothing it approved is carried out.
    APPROVAL_FORGED = "approval_forged"
    # A review check already fails on the base commit, before any change: nothing a ticket
    # does can make it pass, so no engine or model is paid for it (``on_red_base``).
    BASE_RED = "base_red"
    # The forge, the model provider or the network failed through the in-batch back-off:
    # the run waits (``waiting-infra``) for the next batch, its caps untouched.
    INFRA_UNAVAILABLE = "infra_unavailable"
    # ... and stayed down past ``[recovery] infra_wait_max_h``: a person is told.
    INFRA_WAIT_EXPIRED = "infra_wait_expired"


S = RunState
TRANSITIONS: Final[Mapping[RunState, frozenset[RunState]]] = MappingProxyType(
    {
        S.PENDING: frozenset({S.RUNNING, S.NEEDS_HUMAN, S.FAILED}),
        S.RUNNING: frozenset({S.RUNNING, S.RECOVERING, S.COMPLETED, S.NEEDS_HUMAN, S.FAILED}),
        S.RECOVERING: frozenset(
            {S.RUNNING, S.AWAITING_APPROVAL, S.WAITING_INFRA, S.NEEDS_HUMAN, S.FAILED, S.SPLIT}
        ),
        # Answered: back to recovering, where the approved decision is carried out.
        S.AWAITING_APPROVAL: frozenset({S.RECOVERING, S.NEEDS_HUMAN}),
        # The next run of it: on from the failed stage, or a person is told (too old).
        S.WAITING_INFRA: frozenset({S.RUNNING, S.NEEDS_HUMAN}),
        S.COMPLETED: frozenset(),
        S.NEEDS_HUMAN: frozenset(),
        S.FAILED: frozenset(),
        S.SPLIT: frozenset(),
    }
)
TERMINAL: Final[frozenset[RunState]] = frozenset(s for s, out in TRANSITIONS.items() if not out)
# Terminal states reached by a halt must say why; success and split must not. So must
# waiting for the infrastructure: which stage waits, for what.
HALT_REQUIRED: Final[frozenset[RunState]] = frozenset({S.NEEDS_HUMAN, S.FAILED, S.WAITING_INFRA})
# What a person's ``resume`` may do: the terminal states a stopped run may leave, and
# where to. Every halt but the ones below may be resumed from these.
RESUMES: Final[Mapping[RunState, frozenset[RunState]]] = MappingProxyType(
    {S.NEEDS_HUMAN: frozenset({S.RUNNING}), S.FAILED: frozenset({S.RUNNING})}
)
NOT_RESUMABLE_HALTS: Final[frozenset[HaltReason]] = frozenset({HaltReason.HUMAN_REJECTED})
del S


def is_terminal(state: RunState) -> bool:
    return state in TERMINAL


def check_transition(current: RunState, target: RunState, halt: HaltReason | None) -> None:
    """Raise IllegalTransition unless ``current → target`` (with ``halt``) is allowed."""
    if current in TERMINAL:
        raise IllegalTransition(f"illegal transition {current} → {target}: {current} is terminal")
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(f"illegal transition {current} → {target}")
    if target in HALT_REQUIRED and halt is None:
        raise IllegalTransition(f"moving to {target} needs a halt reason")
    if target not in HALT_REQUIRED and halt is not None:
        raise IllegalTransition(f"{target} takes no halt reason (got {halt})")


def check_resume(current: RunState, halt: HaltReason | None) -> None:
    """Raise IllegalTransition unless a person may resume a run in ``current`` (stopped
    for ``halt``): only the moves ``RESUMES`` lists, never after ``NOT_RESUMABLE_HALTS``."""
    if RunState.RUNNING not in RESUMES.get(current, frozenset()):
        why = (
            "it completed"
            if current is RunState.COMPLETED
            else "its work went to sub-tickets"
            if current is RunState.SPLIT
            else "it has not stopped"
        )
        raise IllegalTransition(f"a {current} run cannot be resumed: {why}")
    if halt in NOT_RESUMABLE_HALTS:
        raise IllegalTransition(
            f"a run that ended {halt} cannot be resumed: a person rejected its proposal; "
            "start a new run of the ticket instead"
        )


# The halts a later batch removes by itself once their cause is gone (issue 43): DRY_RUN
# stopped a side-effectful stage, and the batch may now act. (``waiting-infra`` is not a
# halt but a waiting state: every run of the ticket goes on from it.)
LATER_BATCH_HALTS: Final[frozenset[HaltReason]] = frozenset({HaltReason.DRY_RUN_BLOCK})


def later_batch_may_resume(state: RunState, halt: HaltReason | None) -> bool:
    """Whether what stopped a run in ``state`` (``halt``) is something a later batch can
    find gone by itself — so the ticket is never reported finished. Pure."""
    if state is RunState.WAITING_INFRA:
        return True
    return state is RunState.NEEDS_HUMAN and halt in LATER_BATCH_HALTS


def batch_resumes(state: RunState, halt: HaltReason | None, *, dry_run: bool) -> bool:
    """Whether a batch whose environment has DRY_RUN armed (``dry_run``) or not goes on
    with a run in ``state`` stopped for ``halt``: a waiting run always (it decides itself
    whether it has waited too long), a run DRY_RUN stopped only when the batch may act."""
    if state is RunState.WAITING_INFRA:
        return True
    return later_batch_may_resume(state, halt) and not dry_run


def halt_reason_for_failure(*, timed_out: bool, check_stage: bool) -> HaltReason:
    """Why a failed stage halts the ticket, from the facts of the failure alone."""
    if timed_out:
        return HaltReason.TIMED_OUT
    if check_stage:
        return HaltReason.CHECK_FAILED
    return HaltReason.STAGE_FAILED


def dry_run_armed(environ: Mapping[str, str]) -> bool:
    """Side effects are blocked unless DRY_RUN is the literal ``false`` (any case).
    Unset, empty, ``0``, ``no``, ``off`` — anything else — keeps the gate armed."""
    return environ.get("DRY_RUN", "").lower() != "false"


def dry_run_continuation(run_id: str) -> str:
    """The commands that continue a run DRY_RUN stopped: whoever reads a halt, hand-off
    or batch line about it is told both, since the environment that runs the stage (the
    batch's, a fleet worker's, this shell's) is the one whose DRY_RUN decides."""
    return (
        "the next `DRY_RUN=false orchestrator batch` continues it from there, or "
        f"`DRY_RUN=false orchestrator resume {run_id}` now"
    )


def dry_run_block_detail(stage: str, run_id: str) -> str:
    """The halt detail of a run DRY_RUN stopped before ``stage``."""
    return (
        f"stage {stage!r} is side-effectful and DRY_RUN is armed in the environment that "
        f"ran it; {dry_run_continuation(run_id)}"
    )
