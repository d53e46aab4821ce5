from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from orchestrator.domain.errors import IllegalTransition
from orchestrator.domain.lifecycle import (
    TERMINAL,
    TRANSITIONS,
    HaltReason,
    RunState,
    check_transition,
    dry_run_armed,
    halt_reason_for_failure,
)


def test_terminal_states_have_no_outgoing_edges() -> None:
    assert {RunState.COMPLETED, RunState.NEEDS_HUMAN, RunState.FAILED, RunState.SPLIT} <= TERMINAL
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()


def test_every_state_is_in_the_table_and_every_target_is_a_state() -> None:
    assert set(TRANSITIONS) == set(RunState)
    for targets in TRANSITIONS.values():
        assert targets <= set(RunState)


def test_table_is_frozen() -> None:
    assert isinstance(TRANSITIONS, MappingProxyType)
    with pytest.raises(TypeError):
        TRANSITIONS[RunState.COMPLETED] = frozenset({RunState.RUNNING})  # type: ignore[index]
    assert all(isinstance(v, frozenset) for v in TRANSITIONS.values())


def test_every_non_terminal_state_can_reach_a_terminal_state() -> None:
    for start in set(RunState) - TERMINAL:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & TERMINAL, start


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (c, t)
        for c, t in itertools.product(RunState, RunState)
        if t not in TRANSITIONS[c] and c not in TERMINAL
    ],
)
def test_moves_not_in_the_table_are_refused(current: RunState, target: RunState) -> None:
    halt = HaltReason.STAGE_FAILED if target in (RunState.FAILED, RunState.NEEDS_HUMAN) else None
    with pytest.raises(IllegalTransition, match=f"illegal transition {current} → {target}"):
        check_transition(current, target, halt)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("target", list(RunState))
def test_leaving_a_terminal_state_is_refused(terminal: RunState, target: RunState) -> None:
    with pytest.raises(IllegalTransition, match=f"{terminal} is terminal"):
        check_transition(terminal, target, HaltReason.STAGE_FAILED)


def test_halts_need_a_reason_and_success_takes_none() -> None:
    with pytest.raises(IllegalTransition, match="needs a halt reason"):
        check_transition(RunState.RUNNING, RunState.FAILED, None)
    with pytest.raises(IllegalTransition, match="takes no halt reason"):
        check_transition(RunState.RUNNING, RunState.COMPLETED, HaltReason.STAGE_FAILED)
    check_transition(RunState.RUNNING, RunState.FAILED, HaltReason.CHECK_FAILED)
    check_transition(RunState.RUNNING, RunState.COMPLETED, None)


def test_halt_reasons_cover_the_documented_vocabulary() -> None:
    assert {r.value for r in HaltReason} >= {
        "stage_failed",
        "timed_out",
        "check_failed",
        "cap_exhausted",
        "invalid_verdict",
        "dry_run_block",
        "precondition_failed",
    }


def test_failure_reason_is_derived_from_the_facts() -> None:
    assert halt_reason_for_failure(timed_out=True, check_stage=True) is HaltReason.TIMED_OUT
    assert halt_reason_for_failure(timed_out=False, check_stage=True) is HaltReason.CHECK_FAILED
    assert halt_reason_for_failure(timed_out=False, check_stage=False) is HaltReason.STAGE_FAILED


def test_dry_run_is_armed_unless_literally_false() -> None:
    assert dry_run_armed({})
    for value in ("", "0", "no", "off", "False ", "true", "n", "disarm"):
        assert dry_run_armed({"DRY_RUN": value}), value
    for value in ("false", "False", "FALSE", "fAlSe"):
        assert not dry_run_armed({"DRY_RUN": value}), value
