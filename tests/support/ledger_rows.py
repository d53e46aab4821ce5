"""Decision and outcome rows for the ledger's tests, and random sequences of them: what
the index answers is checked against a scan of whatever such a sequence wrote."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from orchestrator.storage.ledger import Ledger, LedgerRow, inputs_hash

SIGNATURES = ("sig-a", "sig-b", "")
ACTIONS = ("retry", "mechanical-fix", "abandon-human")
CONCLUDED = "2026-01-15T12:00:01.000000Z"


def decide(ledger: Ledger, n: int, signature: str, action: str) -> dict[str, Any]:
    return ledger.append(
        LedgerRow(
            kind="decision",
            decision_id=f"T-1-20260115T120000Z-ab12:attempt-1:verdict-{n}",
            ticket="T-1",
            run="T-1-20260115T120000Z-ab12",
            capability="recover-stage",
            inputs_hash=inputs_hash({"n": n}),
            model_version="model-a",
            prompt_version="recovery-v1",
            source="model",
            decision={"verdict": {"action": action, "summary": "s"}, "signature": signature},
            confidence=0.5,
            routing="auto",
            ts="2026-01-15T12:00:00.000000Z",
        )
    )


def conclude(
    ledger: Ledger, decision_row: dict[str, Any], outcome: str, ts: str = CONCLUDED
) -> dict[str, Any]:
    return ledger.append_outcome(decision_row, outcome, ts=ts)


# Each step: a decision (signature, action), or an outcome for the k-th decision so far.
ledger_steps = st.lists(
    st.one_of(
        st.tuples(st.just("decide"), st.sampled_from(SIGNATURES), st.sampled_from(ACTIONS)),
        st.tuples(
            st.just("conclude"),
            st.integers(0, 30),
            st.sampled_from(("mechanical-fix green: ok", "mechanical-fix red", "needs-human: x")),
        ),
    ),
    max_size=25,
)


def play(
    ledger: Ledger, steps: Sequence[Any], ts: Callable[[int], str] = lambda i: CONCLUDED
) -> None:
    """Write ``steps`` (drawn from ``ledger_steps``); the outcome written by step ``i`` is
    stamped ``ts(i)``. An outcome before any decision is skipped."""
    decided: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        if step[0] == "decide":
            decided.append(decide(ledger, len(decided), step[1], step[2]))
        elif decided:
            conclude(ledger, decided[step[1] % len(decided)], step[2], ts(i))
