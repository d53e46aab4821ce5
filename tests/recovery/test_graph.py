"""The recovery graph, node by node: build a state, run one node, assert the result."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.proposals import Caps, Failure, History, Proposal, RecoveryContext, Source
from orchestrator.domain.transcripts import CallPurpose, ModelCall
from orchestrator.domain.verdicts import EscalateModelVerdict, RetryVerdict, abandon
from orchestrator.recovery.confidence import compose, route
from orchestrator.recovery.diagnose import Decision
from orchestrator.recovery.gateway import (
    ModelGateway,
    ModelRequest,
    ScriptedGateway,
    charged_factory,
)
from orchestrator.recovery.graph import (
    NODE_ORDER,
    NODES,
    ConfidenceCompose,
    Entry,
    LlmDecision,
    OutputGuardrail,
    PreCheck,
    RecoveryAgent,
    RoutingNode,
    VerificationNode,
    fail_safe,
    run_graph,
    verification_checks,
)
from orchestrator.recovery.graph_state import GraphDeps, GraphState, Guardrail, Verification
from orchestrator.recovery.guardrail import paths_outside, scrub_object
from orchestrator.recovery.judge import Judge, judge_draw
from orchestrator.recovery.playbook import builtin_playbook
from orchestrator.recovery.transcript import Transcript, call_model
from orchestrator.recovery.verdict import validate_verdict_object
from orchestrator.redaction import scrub

from conftest import examples
from support.hostile_json import hostile_replies
from support.recovery_fixtures import decision_context, prompt_facts

THRESHOLDS = {
    "retry": 0.8, "escalate-model": 0.8, "switch-engine": 0.8, "split": 0.9,
    "abandon-human": 0.0, "mechanical-fix": 0.85,
}  # fmt: skip
SQUASH = (
    '1565f38 "Fix off-by-one in deal()": touches both production code and tests; split it\n'
    "lint-bug-commit-order: FAILED (1 violation(s))\n"
)


def context(tmp_path: Path, **changes: object) -> RecoveryContext:
    decision = decision_context(tmp_path)
    ctx = RecoveryContext(
        decision_id="R-1:attempt-3:verdict-1",
        ticket_id="T-1",
        run_id="R-1",
        attempt=3,
        signature="review/project-tests",
        decision=decision,
        failure=Failure(check="project-tests", output="FAILED", ticket_title="t"),
        facts=prompt_facts(decision),
        bundle_text="<<<BEGIN UNTRUSTED section: diff>>>\n+x\n<<<END section: diff>>>",
        bundle_path="/state/R-1.bundle-1.json",
        inputs_hash="ab" * 32,
        clone_exists=True,
        caps=Caps(diagnoses_used=0, max_diagnoses=2),
    )
    return ctx.model_copy(update=changes)


def deps(gateway: ModelGateway | None = None, **changes: object) -> GraphDeps:
    base = GraphDeps(gateway_factory=lambda: gateway, thresholds=THRESHOLDS)
    return replace(base, **changes)  # type: ignore[arg-type]


def model_decision(verdict: dict[str, object], *, valid: bool = True) -> Decision:
    parsed, _ = validate_verdict_object(verdict)
    return Decision(
        Source.MODEL, parsed if parsed else abandon("bad"), valid, "model verdict", proposal=verdict
    )


def test_the_graph_is_the_seeds_twelve_nodes_in_order() -> None:
    assert NODE_ORDER == (
        "entry", "pre_check", "context_load", "llm_decision", "output_guardrail", "verification",
        "judge", "confidence_compose", "routing", "prepare_proposal", "memory_write", "exit",
    )  # fmt: skip
    assert tuple(n.name for n in NODES) == NODE_ORDER


def test_memory_write_and_exit_prepare_what_is_persisted_and_write_nothing(
    tmp_path: Path,
) -> None:
    """The audit memory and the ledger entries are values on the state: the caller
    writes exactly these. The graph itself leaves no file behind."""
    before = sorted(p for p in tmp_path.rglob("*"))
    state = run_graph(
        context(tmp_path), deps(ScriptedGateway(['{"action": "retry", "summary": "flaky"}']))
    )
    assert sorted(p for p in tmp_path.rglob("*")) == before
    memory = state.require_memory()
    proposal = state.require_proposal()
    assert memory.proposal == proposal and memory.verdict == proposal.action
    assert memory.action == "retry" and memory.source == "model" and memory.usage.calls == 1
    assert memory.inputs == state.ctx
    (entry,) = state.ledger_entries
    assert entry.kind == "decision" and entry.decision_id == proposal.decision_id
    assert entry.decision["verdict"] == {"action": "retry", "summary": "flaky"}
    assert entry.decision["trace"] == list(NODE_ORDER)
    assert (entry.confidence, entry.routing) == (proposal.confidence, proposal.routing)


def test_every_node_runs_once_in_order(tmp_path: Path) -> None:
    state = run_graph(
        context(tmp_path), deps(ScriptedGateway(['{"action": "retry", "summary": "x"}']))
    )
    assert state.trace == NODE_ORDER


def test_entry_binds_identity(tmp_path: Path) -> None:
    state = Entry().run(GraphState(ctx=context(tmp_path, identity={"user": "dana"})), deps())
    assert state.identity == {"actor": "orchestrator", "user": "dana"}


def test_pre_check_decides_known_failures_without_a_model(tmp_path: Path) -> None:
    squash = Failure(check="lint-bug-commit-order", output=SQUASH, ticket_title="t")
    # The app resolves the matching entry into the inputs before the graph runs.
    ctx = context(tmp_path, failure=squash, known=builtin_playbook().match(squash, None))
    ctx = ctx.model_copy(
        update={
            "decision": ctx.decision.model_copy(update={"failing_check": "lint-bug-commit-order"})
        }
    )
    state = PreCheck().run(GraphState(ctx=ctx), deps())
    assert state.early is not None and state.early.source is Source.PLAYBOOK
    assert state.early.playbook_entry == "commit-order-squash"
    # The same failure with no entry resolved goes to the model: the graph matches nothing.
    unresolved = PreCheck().run(GraphState(ctx=ctx.model_copy(update={"known": None})), deps())
    assert unresolved.early is None
    missing = PreCheck().run(GraphState(ctx=context(tmp_path, clone_exists=False)), deps())
    assert missing.early is not None and missing.early.halt is HaltReason.PRECONDITION_FAILED
    spent = PreCheck().run(
        GraphState(ctx=context(tmp_path, caps=Caps(diagnoses_used=2, max_diagnoses=2))), deps()
    )
    assert spent.early is not None and spent.early.cap_exhausted
    assert PreCheck().run(GraphState(ctx=context(tmp_path)), deps()).early is None


def test_llm_decision_skips_the_model_when_pre_check_decided(tmp_path: Path) -> None:
    early = Decision(Source.SYNTHETIC, abandon("x"), True, "x")
    gateway = ScriptedGateway([])
    state = LlmDecision().run(GraphState(ctx=context(tmp_path), early=early), deps(gateway))
    assert state.decision is early and gateway.calls == 0


def test_guardrail_scrubs_secrets_and_personal_data_before_anything_stores_them(
    tmp_path: Path,
) -> None:
    decision = model_decision(
        {
            "action": "abandon-human",
            "summary": "ask jane.doe@example.com; token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        }
    )
    # The reply is scrubbed when the call is recorded, before anything could store it.
    exchange = call_model(
        ScriptedGateway(["contact +1 415-555-0100"]),
        ModelRequest("s", "p", {}, 10),
        CallPurpose.DIAGNOSIS,
    )
    assert exchange.reply.text == "contact +1 415-555-0100"  # decided from what came
    [call] = exchange.transcript.model_calls
    assert exchange.transcript.reply_text(call) == "contact [PHONE]"  # stored scrubbed
    assert call.redactions == 1
    decision = replace(decision, transcript=exchange.transcript)
    state = OutputGuardrail().run(GraphState(ctx=context(tmp_path), decision=decision), deps())
    assert state.decision is not None
    summary = state.decision.verdict.summary
    assert "jane.doe" not in summary and "ghp_" not in summary
    assert "[EMAIL]" in summary
    assert state.guardrail.redactions >= 3


def test_guardrail_blocks_a_proposal_that_reaches_outside_the_clone(tmp_path: Path) -> None:
    verdict = {
        "action": "mechanical-fix",
        "summary": "x",
        "repair_plan": {"verification_check": "project-tests", "commands": ["git -C /etc status"]},
    }
    state = OutputGuardrail().run(
        GraphState(ctx=context(tmp_path), decision=model_decision(verdict)), deps()
    )
    assert state.guardrail.blocked == ("/etc",)
    assert state.decision is not None and state.decision.verdict.action == "abandon-human"
    assert not state.decision.valid


@pytest.mark.parametrize(
    ("proposal", "failed"),
    [
        ({"action": "retry", "summary": "x"}, []),
        ({"action": "reboot", "summary": "x"}, ["in_enum", "schema_ok"]),
        ({"action": "retry"}, ["schema_ok"]),
        (
            {"action": "switch-engine", "summary": "x", "engine": "nope"},
            ["engine_exists", "rules_ok"],
        ),
        (
            {
                "action": "mechanical-fix",
                "summary": "x",
                "repair_plan": {"verification_check": "lint", "commands": ["rm -rf x"]},
            },
            ["names_failing_check", "recipe_allowed", "rules_ok"],
        ),
    ],
)
def test_verification_is_derived_from_deterministic_checks(
    tmp_path: Path, proposal: dict[str, object], failed: list[str]
) -> None:
    state = VerificationNode().run(
        GraphState(ctx=context(tmp_path), decision=model_decision(proposal, valid=not failed)),
        deps(),
    )
    assert state.verification is not None
    assert sorted(n for n, ok in state.verification.checks.items() if not ok) == sorted(failed)
    assert state.verification.verified is (not failed)


def test_a_model_cannot_mark_itself_verified(tmp_path: Path) -> None:
    proposal = {"action": "retry", "summary": "x", "verified": True, "confidence": 1.0}
    state = VerificationNode().run(
        GraphState(ctx=context(tmp_path), decision=model_decision(proposal, valid=False)), deps()
    )
    assert state.verification is not None and not state.verification.verified


def test_judge_is_not_sampled_by_default_so_one_call_per_diagnosis(tmp_path: Path) -> None:
    judge = ScriptedGateway([])
    state = Judge().run(
        GraphState(
            ctx=context(tmp_path), decision=model_decision({"action": "retry", "summary": "x"})
        ),
        deps(judge_factory=lambda: judge),
    )
    assert state.judge is not None and not state.judge.sampled and judge.calls == 0


def test_a_sampled_judge_is_charged_and_its_agreement_recorded(tmp_path: Path) -> None:
    charged: list[str] = []
    judge = ScriptedGateway(['{"agree": false, "reason": "looks like a real bug"}'])
    state = Judge().run(
        GraphState(
            ctx=context(tmp_path), decision=model_decision({"action": "retry", "summary": "x"})
        ),
        deps(
            judge_factory=charged_factory(lambda: judge, lambda: charged.append("judge")),
            judge_sample_rate=1.0,
        ),
    )
    assert state.judge is not None and state.judge.sampled and state.judge.agrees is False
    assert charged == ["judge"] and judge.calls == 1


def test_the_judge_is_skipped_when_its_call_would_pass_the_cap(tmp_path: Path) -> None:
    judge = ScriptedGateway([])
    state = Judge().run(
        GraphState(
            ctx=context(tmp_path, caps=Caps(diagnoses_used=1, max_diagnoses=2)),
            decision=model_decision({"action": "retry", "summary": "x"}),
        ),
        deps(judge_factory=lambda: judge, judge_sample_rate=1.0),
    )
    assert state.judge is not None and not state.judge.sampled


def test_judge_sampling_is_deterministic_per_decision() -> None:
    assert judge_draw("a") == judge_draw("a")
    draws = [judge_draw(f"d{i}") for i in range(2000)]
    assert 0.4 < sum(d < 0.5 for d in draws) / len(draws) < 0.6


def test_confidence_is_composed_and_the_models_self_report_is_ignored(tmp_path: Path) -> None:
    decision = model_decision({"action": "retry", "summary": "x"})
    state = GraphState(
        ctx=context(tmp_path), decision=decision, verification=Verification({"a": True}, 1.0, True)
    )
    composed = ConfidenceCompose().run(state, deps())
    assert (
        composed.confidence
        == compose(verification_score=1.0, source="model", history=History(), judge_agrees=None)[0]
    )
    assert set(composed.signals) == {"verification", "source", "history"}


def test_history_of_green_recipes_raises_confidence() -> None:
    none, _ = compose(verification_score=1.0, source="model", history=History(), judge_agrees=None)
    greens, _ = compose(
        verification_score=1.0, source="model", history=History(green=5, total=5), judge_agrees=None
    )
    reds, _ = compose(
        verification_score=1.0, source="model", history=History(green=0, total=5), judge_agrees=None
    )
    assert reds < none < greens


@pytest.mark.parametrize(
    ("confidence", "verified", "expected"),
    [(0.9, True, "auto"), (0.85, True, "auto"), (0.7, True, "hitl_recommended"),
     (0.6, True, "hitl_required"), (0.99, False, "reject")],
)  # fmt: skip
def test_routing_per_the_seed(confidence: float, verified: bool, expected: str) -> None:
    assert route(confidence, verified=verified, threshold=0.85) == expected


def test_routing_node_uses_the_actions_threshold(tmp_path: Path) -> None:
    decision = model_decision({"action": "retry", "summary": "x"})
    state = GraphState(
        ctx=context(tmp_path),
        decision=decision,
        verification=Verification({}, 1.0, True),
        confidence=0.75,
    )
    assert RoutingNode().run(state, deps()).routing == "hitl_recommended"
    assert RoutingNode().run(state, deps(thresholds={**THRESHOLDS, "retry": 0.7})).routing == "auto"
    capped = replace(state, decision=replace(decision, requires_human=True))
    assert (
        RoutingNode().run(capped, deps(thresholds={**THRESHOLDS, "retry": 0.0})).routing
        == "hitl_required"
    )


def test_defaults_are_conservative_a_fresh_model_verdict_goes_to_a_person(tmp_path: Path) -> None:
    proposal = RecoveryAgent(
        deps(ScriptedGateway(['{"action": "retry", "summary": "flaky"}']))
    ).propose(context(tmp_path))
    assert proposal.routing in ("hitl_recommended", "hitl_required")
    ctx = context(
        tmp_path, failure=Failure(check="lint-bug-commit-order", output=SQUASH, ticket_title="t")
    )
    ctx = ctx.model_copy(
        update={
            "decision": ctx.decision.model_copy(update={"failing_check": "lint-bug-commit-order"})
        }
    )
    assert RecoveryAgent(deps()).propose(ctx).routing == "auto"  # a playbook entry


def test_propose_is_pure_same_context_same_proposal(tmp_path: Path) -> None:
    reply = json.dumps({"action": "escalate-model", "summary": "needs more capacity"})
    ctx = context(tmp_path)
    first_state = RecoveryAgent(deps(ScriptedGateway([reply]))).diagnose(ctx)
    second_state = RecoveryAgent(deps(ScriptedGateway([reply]))).diagnose(ctx)
    first, second = first_state.require_proposal(), second_state.require_proposal()
    assert first == second and first_state.transcript == second_state.transcript
    assert first.decision_id == ctx.decision_id and first.capability == "stage-recovery"
    assert first.action == EscalateModelVerdict(
        action="escalate-model", summary="needs more capacity"
    )
    assert list(tmp_path.iterdir()) == []  # the graph writes nothing


def test_a_rejected_proposal_is_unverified(tmp_path: Path) -> None:
    proposal = RecoveryAgent(deps(ScriptedGateway(["nope", "still nope"]))).propose(
        context(tmp_path)
    )
    assert proposal.routing == "reject"
    assert proposal.action.action == "abandon-human"
    assert proposal.evidence.validation


def test_scrub_leaves_commit_hashes_and_timestamps_alone() -> None:
    text = "commit 4e1243bd22c66e76c2ba9eddc1f91394e57f9f83 at 20261130120000"
    assert scrub(text) == (text, 0)
    assert scrub("card 4111 1111 1111 1111")[0] == "card [CARD]"


def test_guardrail_report_defaults() -> None:
    assert Guardrail() == Guardrail(redactions=0, blocked=())


def test_the_proposal_and_its_context_round_trip_through_json_typed(tmp_path: Path) -> None:
    """What the verdict file stores is what the substrate reads: typed fields, no keys."""
    judge = ScriptedGateway(['{"agree": true, "reason": "fine"}'])
    state = run_graph(
        context(tmp_path, history={"retry": History(green=2, total=3)}),
        deps(
            ScriptedGateway(['{"action": "retry", "summary": "flaky"}']),
            judge_factory=lambda: judge,
            judge_sample_rate=1.0,
        ),
    )
    proposal = state.require_proposal()
    assert isinstance(proposal.action, RetryVerdict)
    evidence = proposal.evidence
    assert (evidence.failure.stage, evidence.failure.check) == ("review", "project-tests")
    assert evidence.source.source is Source.MODEL and evidence.judge.agrees is True
    assert evidence.usage.calls == 2 and evidence.signals["judge"] == 1.0
    again = Proposal.model_validate_json(proposal.model_dump_json())
    assert again == proposal and isinstance(again.action, RetryVerdict)

    ctx = state.ctx
    stored = RecoveryContext.model_validate_json(ctx.model_dump_json())
    assert "bundle_text" not in json.loads(ctx.model_dump_json())  # the bundle file has it
    assert stored == ctx.model_copy(update={"bundle_text": ""})
    assert stored.caps == ctx.caps and stored.history["retry"].score == 0.6

    # The transcript: the diagnosis, then the judge, each with its request's digest.
    calls = state.transcript.model_calls
    assert [c.purpose for c in calls] == [CallPurpose.DIAGNOSIS, CallPurpose.JUDGE]
    assert all(len(c.request_sha256) == 64 for c in calls)
    assert state.transcript.reply_text(calls[0]) == '{"action": "retry", "summary": "flaky"}'


def test_a_gateway_that_raises_is_recorded_with_a_typed_error_kind(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> object:
        raise ConnectionResetError("the line dropped")

    state = run_graph(context(tmp_path), deps(ScriptedGateway([broken])))  # type: ignore[list-item]
    [call] = state.transcript.entries
    assert isinstance(call, ModelCall)
    assert call.error == "gateway_raised" and call.reply_sha256 is None
    assert state.require_decision().reason == "model gateway failed: ConnectionResetError"
    assert Transcript().plus(state.transcript) == state.transcript


# ---- every reply fails closed, through every node ---------------------------------------


@pytest.mark.parametrize(
    "proposal",
    [
        {"action": ["retry"], "summary": "x"},
        {"action": {"retry": 1}, "summary": "x"},
        {"action": None},
        ["retry"],
        "retry",
        None,
        {"action": "mechanical-fix", "summary": "x", "repair_plan": ["git status"]},
        {"action": "mechanical-fix", "summary": "x", "repair_plan": {"commands": "/etc"}},
    ],
)
def test_verification_checks_a_proposal_of_any_shape_without_raising(
    tmp_path: Path, proposal: object
) -> None:
    checks = verification_checks(proposal, decision_context(tmp_path), Guardrail())
    assert checks["in_enum"] is False or checks["schema_ok"] is False
    assert not all(checks.values())


def test_the_guardrail_walks_any_depth_and_any_shape(tmp_path: Path) -> None:
    deep: object = "mail me at a@b.example"
    for _ in range(10_000):
        deep = [deep, {"k": deep}] if isinstance(deep, str) else [deep]
    scrubbed, count = scrub_object({"x": deep, "n": 1.5, "b": None})
    assert count == 2
    inner = scrubbed["x"]
    for _ in range(9_999):
        inner = inner[0]
    assert inner == ["mail me at [EMAIL]", {"k": "mail me at [EMAIL]"}]
    weird = {"repair_plan": {"commands": ["cat /a\x00b", 7, ["/etc"]], "verification_check": 1}}
    assert paths_outside(weird, tmp_path) == ["/a\x00b"]
    assert paths_outside(["/etc"], tmp_path) == []


# A state dir a person might have: a space, a quote, a non-ASCII letter (issue 27).
AWKWARD = 'St ate "x" é'


@pytest.mark.parametrize(
    ("commands", "outside"),
    [
        (["git -C <clone> status", "git -C <clone> add -- <clone>/src/a.py"], []),
        (["git -C '<clone>/my notes' status", 'git -C "<clone>" log'], []),
        (["git -C <clone>/../.. status"], ["<parent>"]),
        (["git -C <clone> show /etc/passwd"], ["/etc/passwd"]),
        (["git -C <clone> commit -m 'see /etc/shadow'"], ["/etc/shadow"]),
    ],
)
def test_a_clone_path_with_spaces_and_quotes_stays_one_path(
    tmp_path: Path, commands: list[str], outside: list[str]
) -> None:
    # The recipe is split into arguments before <clone> is put in, never after: the
    # clone's own path is not searched for paths (cut at its space, it pointed outside).
    clone = tmp_path / AWKWARD / "clone"
    clone.mkdir(parents=True)
    plan = {"repair_plan": {"commands": commands, "verification_check": "lint"}}
    parent = f"{clone}/../.."
    assert paths_outside(plan, clone) == [parent if o == "<parent>" else o for o in outside]


# 150 examples take 3 s on an idle machine and over 20 s beside a loaded suite: the full
# tier runs them; the quick tier its own, fewer (``examples``).
@pytest.mark.slow
@pytest.mark.quick
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_replies, min_size=2, max_size=2))
def test_whatever_the_model_replies_the_graph_ends_in_a_storable_decision(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str]
) -> None:
    tmp_path = tmp_path_factory.mktemp("clone")
    gateway = ScriptedGateway(list(texts))
    state = run_graph(context(tmp_path), deps(gateway, max_reasks=1))
    assert state.trace == NODE_ORDER and gateway.calls <= 2
    memory = state.require_memory()
    if not memory.valid:
        assert memory.action == "abandon-human" and memory.halt == "invalid_verdict"
    # What the caller persists is valid UTF-8 JSON, and reads back as it was (the inputs
    # are stored without the bundle text, which sits in its own file).
    data = memory.model_dump_json().encode("utf-8")
    back = type(memory).model_validate_json(data)
    assert back.model_copy(update={"inputs": memory.inputs}) == memory
    for text in state.transcript.texts.values():
        text.encode("utf-8")


def test_fail_safe_carries_a_synthetic_abandon_through_every_node(tmp_path: Path) -> None:
    why = "recovery failed while deciding (TypeError: boom sk-ant-api03-" + "x" * 40 + " \ud800)"
    state = fail_safe(context(tmp_path), why, calls=1, thresholds=THRESHOLDS)
    assert state.trace == NODE_ORDER
    memory = state.require_memory()
    assert (memory.action, memory.source, memory.valid) == ("abandon-human", "synthetic", False)
    assert memory.halt == "invalid_verdict" and memory.usage.calls == 1
    assert "TypeError: boom" in memory.reason and "sk-ant" not in memory.reason
    assert "\ufffd" in memory.reason  # the lone surrogate, replaced
    memory.model_dump_json().encode("utf-8")
    assert state.require_proposal().routing in ("auto", "reject")  # carried out, no waiting


@pytest.mark.parametrize(
    "odd",
    [
        "[" * 10_000 + "]" * 10_000,
        '{"agree": ["yes"], "reason": {"why": 1}}',
        '{"agree": true, "reason": "\\ud800"}',
        '{"agree": true, "reason": "raw \ud800"}',
        '["agree"]',
        "1e999",
    ],
)
def test_an_odd_judge_reply_is_no_opinion_never_a_crash(tmp_path: Path, odd: str) -> None:
    judge = ScriptedGateway([odd])
    state = Judge().run(
        GraphState(
            ctx=context(tmp_path), decision=model_decision({"action": "retry", "summary": "x"})
        ),
        deps(judge_factory=lambda: judge, judge_sample_rate=1.0),
    )
    assert state.judge is not None and state.judge.sampled and judge.calls == 1
    assert state.judge.agrees is None
    state.judge.reason.encode("utf-8")
