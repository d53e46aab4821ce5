"""Confidence and routing when the ledger has a long memory: infrastructure verdicts are
rules (never sent to a person by history), and history feeds only a model verdict's
confidence, weighted by age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from recovery.test_graph import SQUASH, context, deps

from orchestrator.domain.proposals import Caps, Failure, History
from orchestrator.recovery.confidence import (
    HALF_LIFE_DAYS,
    RECENT_OUTCOMES,
    PastOutcome,
    compose,
    decayed_history,
    outcome_weight,
    route_infra,
)
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.recovery.graph import RecoveryAgent, run_graph

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# What a busy ledger says about retries of this stage: a hundred, none of them green.
LONG_RED_HISTORY = {
    "retry": History(green=0, total=100),
    "abandon-human": History(green=0, total=100),
    "mechanical-fix": History(green=0, total=100),
}


@pytest.mark.parametrize("infra", ["rate_limited", "outage", "timeout", "engine_error"])
def test_an_infra_retry_is_automatic_whatever_the_ledger_remembers(
    tmp_path: Path, infra: str
) -> None:
    ctx = context(
        tmp_path,
        failure=Failure(check=None, output="", ticket_title="t", infra=infra, infra_detail="429"),
        history=LONG_RED_HISTORY,
    )
    state = run_graph(ctx, deps())
    proposal = state.require_proposal()
    assert proposal.action.action == "retry"
    assert proposal.routing == "auto"
    assert "history" not in proposal.evidence.signals
    assert "routed by rule" in proposal.reasoning[3]


def test_an_infra_stop_is_carried_out_without_asking_whatever_the_history(tmp_path: Path) -> None:
    ctx = context(
        tmp_path,
        failure=Failure(check=None, output="", ticket_title="t", infra="auth_error"),
        history=LONG_RED_HISTORY,
        caps=Caps(diagnoses_used=0, max_diagnoses=2),
    )
    proposal = run_graph(ctx, deps()).require_proposal()
    assert (proposal.action.action, proposal.routing) == ("abandon-human", "auto")


def test_infra_routing_is_a_rule_only_an_unverified_verdict_is_refused() -> None:
    assert route_infra(verified=True) == "auto"
    assert route_infra(verified=False) == "reject"


def test_a_playbook_verdict_is_not_lowered_by_history(tmp_path: Path) -> None:
    ctx = context(
        tmp_path,
        failure=Failure(check="lint-bug-commit-order", output=SQUASH, ticket_title="t"),
        history=LONG_RED_HISTORY,
    )
    ctx = ctx.model_copy(
        update={
            "decision": ctx.decision.model_copy(update={"failing_check": "lint-bug-commit-order"})
        }
    )
    fresh = RecoveryAgent(deps()).propose(ctx.model_copy(update={"history": {}}))
    remembered = RecoveryAgent(deps()).propose(ctx)
    assert remembered.routing == "auto"
    assert remembered.confidence == fresh.confidence
    assert "history" not in remembered.evidence.signals


def test_history_still_feeds_a_model_verdict(tmp_path: Path) -> None:
    reply = '{"action": "retry", "summary": "flaky"}'
    fresh = RecoveryAgent(deps(ScriptedGateway([reply]))).propose(context(tmp_path))
    red = RecoveryAgent(deps(ScriptedGateway([reply]))).propose(
        context(tmp_path, history=LONG_RED_HISTORY)
    )
    assert red.confidence < fresh.confidence
    assert red.evidence.signals["history"] == round(1 / 102, 4)


def test_compose_leaves_history_out_for_every_source_but_the_model() -> None:
    red = History(green=0, total=100)
    for source in ("infra", "playbook", "synthetic"):
        with_red, signals = compose(
            verification_score=1.0, source=source, history=red, judge_agrees=None
        )
        without, _ = compose(
            verification_score=1.0, source=source, history=History(), judge_agrees=None
        )
        assert with_red == without and "history" not in signals
    assert (
        compose(verification_score=1.0, source="model", history=red, judge_agrees=None)[0]
        < compose(verification_score=1.0, source="model", history=History(), judge_agrees=None)[0]
    )


def test_an_outcome_weighs_half_after_one_half_life() -> None:
    day = 86400.0
    assert outcome_weight(0, HALF_LIFE_DAYS * day) == 1.0
    assert outcome_weight(HALF_LIFE_DAYS * day, HALF_LIFE_DAYS * day) == 0.5
    assert outcome_weight(2 * HALF_LIFE_DAYS * day, HALF_LIFE_DAYS * day) == 0.25
    assert outcome_weight(-day, HALF_LIFE_DAYS * day) == 1.0  # a clock step back


def test_old_red_history_fades_back_towards_no_opinion() -> None:
    def reds(age: timedelta) -> list[PastOutcome]:
        return [PastOutcome(at=NOW - age, green=False) for _ in range(20)]

    fresh = decayed_history(reds(timedelta(0)), now=NOW)
    old = decayed_history(reds(timedelta(days=180)), now=NOW)
    assert fresh.score == pytest.approx(1 / 22)
    assert old.total < 0.01 and old.score == pytest.approx(0.5, abs=0.01)


def test_the_latest_outcomes_outweigh_older_ones() -> None:
    # A recipe that used to fail and lately goes green scores above no opinion.
    outcomes = [PastOutcome(at=NOW - timedelta(days=60 + i), green=False) for i in range(10)]
    outcomes += [PastOutcome(at=NOW - timedelta(hours=i), green=True) for i in range(5)]
    history = decayed_history(outcomes, now=NOW)
    assert history.score > 0.8
    # Counts alone (no decay) would say the opposite.
    assert History(green=5, total=15).score < 0.5


def test_only_the_last_outcomes_count() -> None:
    old_greens = [
        PastOutcome(at=NOW - timedelta(seconds=RECENT_OUTCOMES + i), green=True) for i in range(500)
    ]
    recent_reds = [
        PastOutcome(at=NOW - timedelta(seconds=i), green=False) for i in range(RECENT_OUTCOMES)
    ]
    history = decayed_history([*old_greens, *recent_reds], now=NOW)
    assert history.green == 0.0 and history.total == pytest.approx(RECENT_OUTCOMES, rel=1e-3)


def test_a_verdict_file_with_whole_number_counts_reads_as_weights() -> None:
    assert History.model_validate({"green": 2, "total": 3}).score == 0.6


def test_a_decision_made_under_the_first_rules_replays_under_them(tmp_path: Path) -> None:
    """Stored inputs that do not name their rules read as the first ones, where history
    fed every source: a replay of an older decision reproduces it, not today's rules."""
    import json

    from orchestrator.domain.decisions import AuditMemory

    ctx = context(
        tmp_path,
        failure=Failure(check=None, output="", ticket_title="t", infra="rate_limited"),
        history=LONG_RED_HISTORY,
    )
    memory = run_graph(ctx, deps()).require_memory()
    stored = json.loads(memory.model_dump_json())
    assert stored["inputs"]["confidence_rules"] == 2
    del stored["inputs"]["confidence_rules"]
    old = AuditMemory.model_validate(stored).inputs
    assert old is not None and old.confidence_rules == 1
    then = run_graph(old.model_copy(update={"bundle_text": ""}), deps()).require_proposal()
    assert then.routing != "auto" and "history" in then.evidence.signals
