"""Recovery as a fixed graph over one typed state (the determinism layer's shape).

    entry → pre_check → context_load → llm_decision → output_guardrail → verification
          → judge → confidence_compose → routing → prepare_proposal → memory_write → exit

Every node is ``run(state, deps) -> state``; the path is the same every time, only what
the nodes find differs. The model appears in ``llm_decision`` (and, when sampled, in
``judge``); every other node is plain code a test can pin by building a state.

``RecoveryAgent.diagnose(ctx)`` returns the final state and persists nothing: the same
context and the same scripted gateway give an equal state. Its only way out is the
injected gateway factory: each gateway the app hands out charges the diagnosis cap
before its first live call, so a call is never made uncharged
(``orchestrator.app.journaled_calls``).
``memory_write`` and ``exit`` prepare the audit memory and the ledger entries as values
(``orchestrator.recovery.audit``); the caller (``orchestrator.app.recover``) writes
exactly those, once, before anything decided runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from orchestrator.domain.decisions import AuditMemory, TokenUsage
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.proposals import (
    BundleEvidence,
    Evidence,
    FailureEvidence,
    GuardrailEvidence,
    HaltEvidence,
    History,
    JudgeEvidence,
    Proposal,
    RecoveryContext,
    Source,
    SourceEvidence,
    UsageEvidence,
)
from orchestrator.domain.verdicts import DecisionContext, abandon
from orchestrator.domain.vocabulary import VOCABULARY, rule_checks, semantic_errors
from orchestrator.recovery.audit import CAPABILITY, ledger_entries
from orchestrator.recovery.confidence import compose, route, route_infra
from orchestrator.recovery.diagnose import Decision, Usage, ask_model, precheck
from orchestrator.recovery.graph_state import (
    GraphDeps,
    GraphState,
    Guardrail,
    JudgeResult,
    Node,
    Verification,
)
from orchestrator.recovery.guardrail import paths_outside, scrub_object
from orchestrator.recovery.judge import Judge
from orchestrator.recovery.transcript import valid_text
from orchestrator.recovery.verdict import validate_verdict_object
from orchestrator.redaction import scrub


class Entry:
    name = "entry"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        return replace(state, identity={"actor": "orchestrator", **state.ctx.identity})


class PreCheck:
    name = "pre_check"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        if state.early is not None:  # decided before the graph ran (``fail_safe``)
            return state
        ctx = state.ctx
        early = precheck(
            ctx=ctx.decision, failure=ctx.failure, clone_exists=ctx.clone_exists, caps=ctx.caps,
            known=ctx.known,
        )  # fmt: skip
        return replace(state, early=early)


class ContextLoad:
    name = "context_load"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        # The bundle was bounded and redacted when it was built; a decision made without
        # the model needs none of it.
        return replace(state, context_text="" if state.early else state.ctx.bundle_text)


class LlmDecision:
    name = "llm_decision"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        if state.early is not None:
            return replace(state, decision=state.early)
        if deps.investigate is not None:
            return replace(state, decision=deps.investigate(state, deps))
        ctx = state.ctx
        decision = ask_model(
            ctx=ctx.decision,
            facts=ctx.facts,
            bundle_text=state.context_text,
            gateway_factory=deps.gateway_factory,
            max_reasks=deps.max_reasks,
            max_tokens=deps.max_tokens,
            prompt_version=deps.prompt_version,
        )
        return replace(state, decision=decision)


class OutputGuardrail:
    name = "output_guardrail"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        verdict_data, redacted = scrub_object(decision.verdict.model_dump(mode="json"))
        # The replies were scrubbed when they were recorded; count what that replaced.
        redacted += sum(call.redactions for call in decision.transcript.model_calls)
        blocked = tuple(paths_outside(verdict_data, state.ctx.decision.clone_dir))
        if blocked:
            why = f"output guardrail blocked a proposal that reaches outside the clone: {list(blocked)}"
            decision = replace(
                decision, verdict=abandon(why), valid=False, reason=why,
                halt=HaltReason.INVALID_VERDICT, errors=(*decision.errors, why),
            )  # fmt: skip
        else:
            scrubbed, errors = validate_verdict_object(verdict_data)
            if scrubbed is None:  # scrubbing broke it: refuse rather than run something else
                why = f"output guardrail: the scrubbed verdict no longer validates: {errors}"
                decision = replace(decision, verdict=abandon(why), valid=False, reason=why)
            else:
                decision = replace(decision, verdict=scrubbed)
        return replace(
            state, decision=decision, guardrail=Guardrail(redactions=redacted, blocked=blocked)
        )


def verification_checks(
    proposal: object, ctx: DecisionContext, guardrail: Guardrail
) -> dict[str, bool]:
    """Deterministic checks on what was proposed. Each business rule is its own check;
    which rules a verdict has is its action's (the registry's) to say."""
    action = proposal.get("action") if isinstance(proposal, dict) else None
    # The proposal is the model's raw JSON: an ``action`` may be a list or an object.
    checks = {"in_enum": isinstance(action, str) and action in VOCABULARY}
    verdict, _ = validate_verdict_object(proposal)
    checks["schema_ok"] = verdict is not None
    if verdict is not None:
        checks.update(rule_checks(verdict, ctx))
        checks["rules_ok"] = not semantic_errors(verdict, ctx)
    checks["guardrail_ok"] = not guardrail.blocked
    return checks


def routed_by_rule(state: GraphState) -> bool:
    """An infrastructure verdict is a rule: verified as the verdict it is, and routed
    without a score. Decisions made under the first confidence rules (replayed from older
    verdict files) were not."""
    return state.require_decision().source is Source.INFRA and state.ctx.confidence_rules >= 2


class VerificationNode:
    name = "verification"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        # A synthetic or infrastructure stop has no proposal of its own: what is checked
        # is the verdict.
        proposal = (
            decision.proposal
            if decision.proposal is not None
            or not (decision.source is Source.SYNTHETIC or routed_by_rule(state))
            else decision.verdict.model_dump(mode="json")
        )
        checks = verification_checks(proposal, state.ctx.decision, state.guardrail)
        score = sum(checks.values()) / len(checks)
        return replace(
            state, verification=Verification(checks, round(score, 4), all(checks.values()))
        )


class ConfidenceCompose:
    name = "confidence_compose"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        assert state.verification is not None
        confidence, signals = compose(
            verification_score=state.verification.score,
            source=decision.source.value,
            history=state.ctx.history.get(decision.verdict.action, History()),
            judge_agrees=state.judge.agrees if state.judge else None,
            rules=state.ctx.confidence_rules,
        )
        return replace(state, confidence=confidence, signals=signals)


class RoutingNode:
    name = "routing"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        assert state.verification is not None and state.confidence is not None
        verified = state.verification.verified
        if routed_by_rule(state):
            # A rule, not a score: never sent to a person by what the ledger remembers.
            return replace(state, routing=route_infra(verified=verified))
        threshold = deps.thresholds.get(decision.verdict.action, 1.0)
        routing = route(state.confidence, verified=verified, threshold=threshold)
        if decision.requires_human and routing != "reject":
            routing = "hitl_required"
        return replace(state, routing=routing)


class PrepareProposal:
    name = "prepare_proposal"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        ctx = state.ctx
        assert state.verification is not None and state.routing is not None
        assert state.confidence is not None
        failed = [name for name, ok in state.verification.checks.items() if not ok]
        reasoning = (
            decision.reason,
            f"verification: {'all checks passed' if not failed else 'failed ' + ', '.join(failed)}",
            f"confidence {state.confidence} from {dict(state.signals)}",
            f"routing {state.routing} ("
            + (
                "infrastructure verdicts are routed by rule"
                if routed_by_rule(state)
                else f"threshold for {decision.verdict.action}: "
                f"{deps.thresholds.get(decision.verdict.action, 1.0)}"
            )
            + ")",
        )
        judge = state.judge or JudgeResult(sampled=False)
        usage = decision.usage.plus(
            judge.usage.calls, judge.usage.input_tokens, judge.usage.output_tokens
        )
        evidence = Evidence(
            source=SourceEvidence(
                source=decision.source, valid=decision.valid,
                playbook_entry=decision.playbook_entry, model=decision.model,
            ),
            failure=FailureEvidence(
                stage=ctx.decision.failing_stage, check=ctx.decision.failing_check,
                attempt=ctx.attempt, signature=ctx.signature, infra=ctx.failure.infra,
            ),
            halt=HaltEvidence(reason=decision.halt, cap_exhausted=decision.cap_exhausted),
            bundle=BundleEvidence(path=ctx.bundle_path, inputs_hash=ctx.inputs_hash),
            verification=dict(state.verification.checks),
            signals=dict(state.signals),
            guardrail=GuardrailEvidence(
                redactions=state.guardrail.redactions, blocked=state.guardrail.blocked
            ),
            validation=decision.errors,
            usage=UsageEvidence(
                calls=usage.calls, input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
            ),
            judge=JudgeEvidence(
                sampled=judge.sampled, agrees=judge.agrees, reason=judge.reason,
                unavailable=judge.unavailable,
            ),
        )  # fmt: skip
        proposal = Proposal(
            decision_id=ctx.decision_id,
            capability=CAPABILITY,
            action=decision.verdict,
            confidence=state.confidence,
            routing=state.routing,
            reasoning=reasoning,
            evidence=evidence,
        )
        return replace(state, proposal=proposal)


class MemoryWrite:
    """The agent's own audit memory (not business state), as the verdict file will hold it."""

    name = "memory_write"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        proposal = state.require_proposal()
        ctx = state.ctx
        usage = proposal.evidence.usage
        memory = AuditMemory(
            decision_id=ctx.decision_id,
            run_id=ctx.run_id,
            ticket_id=ctx.ticket_id,
            attempt=ctx.attempt,
            failing_stage=ctx.decision.failing_stage,
            failing_check=ctx.decision.failing_check,
            source=decision.source.value,
            action=decision.verdict.action,
            valid=decision.valid,
            reason=decision.reason,
            halt=decision.halt.value if decision.halt else None,
            verdict=decision.verdict,
            errors=decision.errors,
            playbook_entry=decision.playbook_entry,
            model=decision.model,
            prompt_version=deps.prompt_version,
            usage=TokenUsage(
                calls=usage.calls, input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
            ),
            bundle_path=ctx.bundle_path,
            proposal=proposal,
            inputs=ctx,
            transcript=state.transcript.entries,
        )  # fmt: skip
        return replace(state, memory=memory)


class Exit:
    """The immutable ledger entries: each investigation step, then the decision."""

    name = "exit"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        entries = ledger_entries(state.require_memory(), state.ctx, (*state.trace, self.name))
        return replace(state, ledger_entries=entries)


NODES: Final[tuple[Node, ...]] = (
    Entry(), PreCheck(), ContextLoad(), LlmDecision(), OutputGuardrail(), VerificationNode(),
    Judge(), ConfidenceCompose(), RoutingNode(), PrepareProposal(), MemoryWrite(), Exit(),
)  # fmt: skip
NODE_ORDER: Final = (
    "entry", "pre_check", "context_load", "llm_decision", "output_guardrail", "verification",
    "judge", "confidence_compose", "routing", "prepare_proposal", "memory_write", "exit",
)  # fmt: skip
# The graph is checked when it is built: the node sequence is fixed, in order.
if tuple(n.name for n in NODES) != NODE_ORDER:  # pragma: no cover - a broken build
    raise RuntimeError(f"recovery graph out of order: {[n.name for n in NODES]}")


def run_graph(ctx: RecoveryContext, deps: GraphDeps, decided: Decision | None = None) -> GraphState:
    """Every node in order. ``decided``: a decision made before the graph ran, which the
    graph carries through its exits without asking anyone."""
    state = GraphState(ctx=ctx, early=decided)
    for node in NODES:
        state = node.run(state, deps)
        state = replace(state, trace=(*state.trace, node.name))
    return state


def _nothing() -> None:
    return None


def fail_safe(
    ctx: RecoveryContext, why: str, calls: int, thresholds: Mapping[str, float]
) -> GraphState:
    """The decision when deciding itself failed (a bug, never the model's reply, which
    is always validated): ``abandon-human`` for a person, carried through every node so
    it is persisted and audited like any decision. ``calls``: the diagnoses already
    charged, which stay charged. Asks no model."""
    why = scrub(valid_text(why)[0])[0][:1000]
    decision = Decision(
        Source.SYNTHETIC, abandon(why), False, why, halt=HaltReason.INVALID_VERDICT,
        errors=(why,), usage=Usage(calls=calls),
    )  # fmt: skip
    deps = GraphDeps(gateway_factory=_nothing, thresholds=thresholds, judge_factory=_nothing)
    return run_graph(ctx, deps, decided=decision)


class RecoveryAgent:
    """Proposes; never acts. The substrate applies what it proposes, after approval."""

    def __init__(self, deps: GraphDeps) -> None:
        self.deps = deps

    def diagnose(self, ctx: RecoveryContext) -> GraphState:
        return run_graph(ctx, self.deps)

    def propose(self, ctx: RecoveryContext) -> Proposal:
        return self.diagnose(ctx).require_proposal()
