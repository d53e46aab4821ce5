"""The judge node: on a deterministic sample of model decisions, a second model reviews
the verdict; its agreement feeds confidence, its failure is no opinion, never a crash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from orchestrator.domain.proposals import (
    Source,
)
from orchestrator.domain.transcripts import CallPurpose
from orchestrator.recovery.diagnose import Usage
from orchestrator.recovery.gateway import ModelRequest, Unavailable
from orchestrator.recovery.graph_state import GraphDeps, GraphState, JudgeResult
from orchestrator.recovery.transcript import call_model
from orchestrator.recovery.verdict import parse_reply
from orchestrator.redaction import scrub


def judge_draw(decision_id: str) -> float:
    """A deterministic draw in [0, 1) per decision: sampling is replayable."""
    return int(hashlib.sha256(decision_id.encode()).hexdigest()[:12], 16) / float(16**12)


JUDGE_SYSTEM = (
    "You review one decision about a failed build stage. Reply with exactly one JSON object "
    '{"agree": true|false, "reason": "..."} and nothing else.'
)


class Judge:
    name = "judge"

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState:
        decision = state.require_decision()
        ctx = state.ctx
        eligible = (
            decision.source is Source.MODEL
            and decision.valid
            and deps.judge_sample_rate > 0
            and judge_draw(ctx.decision_id) < deps.judge_sample_rate
            # The judge's call counts against the same cap as the diagnosis it reviews.
            and ctx.caps.diagnoses_used + 1 < ctx.caps.max_diagnoses
        )
        if not eligible:
            return replace(state, judge=JudgeResult(sampled=False))
        gateway = deps.judge_factory()
        if gateway is None or isinstance(gateway, Unavailable):
            why = gateway.reason if gateway else "no judge configured"
            return replace(state, judge=JudgeResult(sampled=False, reason=why, unavailable=True))
        prompt = (
            f"Failure: stage {ctx.decision.failing_stage}, check {ctx.decision.failing_check}.\n"
            f"Proposed verdict: {json.dumps(decision.verdict.model_dump(mode='json'))}\n\n"
            f"{state.context_text}\n\nDo you agree this is the right next step?"
        )
        schema = {
            "type": "object",
            "properties": {"agree": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["agree", "reason"],
            "additionalProperties": False,
        }
        exchange = call_model(
            gateway, ModelRequest(JUDGE_SYSTEM, prompt, schema, 512), CallPurpose.JUDGE
        )
        reply = exchange.reply
        usage = Usage().plus(1, reply.input_tokens, reply.output_tokens)
        # A judge failure, or a reply of any other shape, is "no opinion", never a crash.
        answer, _ = (None, None) if exchange.lone_surrogates else parse_reply(reply.text or "")
        if reply.failure is not None:
            agrees, reason = None, "judge failed"
        elif not isinstance(answer, dict):
            agrees, reason = None, "judge reply was not valid"
        else:
            said = answer.get("agree")
            agrees = said if isinstance(said, bool) else None
            why = answer.get("reason", "")
            reason = scrub(why if isinstance(why, str) else json.dumps(why))[0][:500]
        judged = JudgeResult(
            sampled=True, agrees=agrees, reason=reason, usage=usage, transcript=exchange.transcript
        )
        return replace(state, judge=judged)
