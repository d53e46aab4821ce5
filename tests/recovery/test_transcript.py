"""The call transcript, unit by unit: a decision's calls recorded with their request
digests, re-fed by the player to today's graph — identical when nothing changed, and a
divergence naming the call when a reply or a request did."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.domain.proposals import Caps, Failure, RecoveryContext
from orchestrator.domain.transcripts import CallError, CallPurpose, ModelCall
from orchestrator.recovery.gateway import ModelRequest, ScriptedGateway
from orchestrator.recovery.graph import run_graph
from orchestrator.recovery.graph_state import GraphDeps, GraphState
from orchestrator.recovery.transcript import (
    Transcript,
    TranscriptPlayer,
    call_model,
    request_digest,
    text_digest,
)

from support.recovery_fixtures import decision_context, prompt_facts

THRESHOLDS = {a: 0.5 for a in ("retry", "escalate-model", "switch-engine", "split")} | {
    "abandon-human": 0.0,
    "mechanical-fix": 0.85,
}
RETRY = json.dumps({"action": "retry", "summary": "flaky"})


def context() -> RecoveryContext:
    decision = decision_context(Path("/nonexistent/clone"))
    return RecoveryContext(
        decision_id="R-1:attempt-3:verdict-1",
        ticket_id="T-1",
        run_id="R-1",
        attempt=3,
        signature="review/project-tests",
        decision=decision,
        failure=Failure(check="project-tests", output="FAILED", ticket_title="t"),
        facts=prompt_facts(decision),
        bundle_text="<<<BEGIN UNTRUSTED section: diff>>>\n+x\n<<<END section: diff>>>",
        bundle_path=None,
        inputs_hash="ab" * 32,
        clone_exists=True,
        caps=Caps(diagnoses_used=0, max_diagnoses=4),
    )


def decide(gateway: ScriptedGateway | TranscriptPlayer) -> GraphState:
    deps = GraphDeps(
        gateway_factory=lambda: gateway,
        thresholds=THRESHOLDS,
        judge_sample_rate=1.0,
        judge_factory=lambda: gateway,
    )
    return run_graph(context(), deps)


def player_for(state: GraphState, **texts: str) -> TranscriptPlayer:
    return TranscriptPlayer(state.transcript.entries, {**state.transcript.texts, **texts})


def test_a_transcript_re_fed_gives_the_same_decision_and_no_divergence() -> None:
    then = decide(ScriptedGateway(["not json", RETRY, '{"agree": true, "reason": "ok"}']))
    calls = then.transcript.model_calls
    assert [c.purpose for c in calls] == [
        CallPurpose.DIAGNOSIS,
        CallPurpose.REASK,
        CallPurpose.JUDGE,
    ]
    player = player_for(then)
    now = decide(player)
    assert player.finish() == []
    assert now.require_proposal() == then.require_proposal()
    assert now.transcript == then.transcript


def test_a_changed_reply_is_a_divergence_naming_the_call() -> None:
    then = decide(ScriptedGateway([RETRY, '{"agree": true, "reason": "ok"}']))
    diagnosis = then.transcript.model_calls[0]
    assert diagnosis.reply_sha256 is not None
    changed = json.dumps({"action": "abandon-human", "summary": "flaky"})
    player = player_for(then, **{diagnosis.reply_sha256: changed})
    now = decide(player)
    [divergence, *rest] = player.finish()
    assert divergence.name == "transcript.call[0] (diagnosis).reply"
    assert (divergence.then, divergence.now) == (diagnosis.reply_sha256, text_digest(changed))
    assert now.require_proposal().action.action == "abandon-human"
    # The judge's question quoted the verdict, which changed: its request diverges too.
    assert [d.name for d in rest] == ["transcript.call[1] (judge).request"]


def test_a_reply_of_any_length_is_recorded_whole_and_replays_identical() -> None:
    long = '{"action": "retry",' + " " * 50_000 + '"summary": "flaky"}'
    then = decide(ScriptedGateway([long, '{"agree": true, "reason": "ok"}']))
    call = then.transcript.model_calls[0]
    assert call.reply_chars == len(long) and then.transcript.reply_text(call) == long
    player = player_for(then)
    now = decide(player)
    assert player.finish() == []
    assert now.require_proposal() == then.require_proposal()


def test_calls_beyond_the_transcript_and_calls_never_made_are_named() -> None:
    then = decide(ScriptedGateway([RETRY, '{"agree": true, "reason": "ok"}']))
    short = TranscriptPlayer(then.transcript.entries[:1], then.transcript.texts)
    decide(short)
    assert [d.name for d in short.finish()] == ["transcript.call[1].missing"]

    extra = ModelCall(
        purpose=CallPurpose.JUDGE, request_sha256="0" * 64, reply_sha256=None, model="m"
    )
    long = TranscriptPlayer((*then.transcript.entries, extra), then.transcript.texts)
    decide(long)
    assert [d.name for d in long.finish()] == ["transcript.call[2] (judge).unused"]


def test_the_request_digest_covers_what_was_asked_and_why() -> None:
    request = ModelRequest("system", "prompt", {"type": "object"}, 100)
    base = request_digest(request, CallPurpose.DIAGNOSIS)
    assert base == request_digest(
        ModelRequest("system", "prompt", {"type": "object"}, 100), CallPurpose.DIAGNOSIS
    )
    assert base != request_digest(request, CallPurpose.REASK)
    assert base != request_digest(
        ModelRequest("system", "prompt.", {"type": "object"}, 100), CallPurpose.DIAGNOSIS
    )
    assert base != request_digest(
        ModelRequest("system", "prompt", {"type": "object"}, 101), CallPurpose.DIAGNOSIS
    )


def test_an_error_reply_is_recorded_with_its_kind_and_replays_the_same() -> None:
    def refuse(request: ModelRequest) -> object:
        raise TimeoutError

    exchange = call_model(
        ScriptedGateway([refuse]),  # type: ignore[list-item]
        ModelRequest("s", "p", {}, 10),
        CallPurpose.DIAGNOSIS,
    )
    [call] = exchange.transcript.model_calls
    assert call.error is CallError.GATEWAY_RAISED and call.error_detail == "TimeoutError"
    replayed = TranscriptPlayer(exchange.transcript.entries, {}).exchange(
        ModelRequest("s", "p", {}, 10), CallPurpose.DIAGNOSIS
    )
    assert replayed.reply == exchange.reply
    assert replayed.transcript == exchange.transcript
    assert Transcript().plus(replayed.transcript).entries == (call,)


def test_a_missing_reply_text_is_a_divergence_not_a_crash() -> None:
    then = decide(ScriptedGateway([RETRY, '{"agree": true, "reason": "ok"}']))
    diagnosis = then.transcript.model_calls[0]
    texts = {k: v for k, v in then.transcript.texts.items() if k != diagnosis.reply_sha256}
    player = TranscriptPlayer(then.transcript.entries, texts)
    now = decide(player)
    first = player.finish()[0]
    assert (first.name, first.then, first.now) == (
        "transcript.call[0] (diagnosis).reply",
        diagnosis.reply_sha256,
        "<missing>",
    )
    # No text: the call reads as one that gave no answer, and a person gets the ticket.
    assert now.require_proposal().action.action == "abandon-human"
