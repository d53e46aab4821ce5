"""Bounded investigation: the one loop (``[diagnosis] mode = "investigate"``, off by default).

Before deciding, the model may call read-only tools from a per-capability allow-list —
read a file in the clone, ``git log``, grep — with four rails:

1. a hard step cap: a ``for`` loop, never "until the model says it is done";
2. the allow-list: a step naming any other tool raises ``DisallowedTool``;
3. a transcript: every step — the model's reply and the tool's (redacted) result — is
   recorded in the decision's transcript, which the caller persists and appends to the
   ledger, so the decision can be replayed exactly;
4. the same exits: the final answer is validated like any verdict, and then goes through
   the guardrail, verification, confidence and routing. Hitting the cap yields a proposal
   that a person must decide (``hitl_required``).

The tools themselves are injected (they read the clone; ``git log`` needs a process, and
nothing in this package starts one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.proposals import PromptFacts, Source
from orchestrator.domain.transcripts import CallPurpose
from orchestrator.domain.verdicts import DecisionContext, abandon
from orchestrator.domain.vocabulary import semantic_errors
from orchestrator.recovery.diagnose import Decision, Usage, failed_call_decision, no_model_decision
from orchestrator.recovery.gateway import ModelGateway, ModelRequest, Unavailable
from orchestrator.recovery.prompt import PROMPT_VERSION, SYSTEM, build_prompt
from orchestrator.recovery.transcript import Transcript, call_model, tool_record
from orchestrator.recovery.verdict import (
    LONE_SURROGATES,
    parse_reply,
    shown_short,
    validate_verdict_object,
)
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from orchestrator.recovery.graph_state import GraphDeps, GraphState

MAX_OBSERVATION_CHARS = 4000

Tool = Callable[[Mapping[str, Any]], str]


class DisallowedTool(Exception):
    """The model reached for a tool that is not on this capability's allow-list. Carries
    what the loop had spent and heard, so the refusal is accounted for like any call."""

    def __init__(
        self, tool: str, usage: Usage | None = None, transcript: Transcript | None = None
    ) -> None:
        super().__init__(tool)
        self.tool = tool
        self.usage = usage or Usage()
        self.transcript = transcript or Transcript()


def step_schema(allow: frozenset[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": f"one of {sorted(allow)}"},
            "args": {"type": "object"},
            "final": {"type": "object", "description": "the verdict, when you have decided"},
        },
        "additionalProperties": False,
    }


def _prompt(
    facts: PromptFacts,
    bundle: str,
    allow: frozenset[str],
    observations: list[str],
    version: str = PROMPT_VERSION,
) -> str:
    tools = (
        "Before deciding you may call read-only tools, one per reply, as "
        '{"tool": NAME, "args": {...}}: read_file {"path": relative path in the clone}, '
        'git_log {"n": count}, grep {"text": literal text}. '
        f"Allowed here: {sorted(allow)}. When you have decided, reply "
        '{"final": <the verdict object>}.'
    )
    seen = "\n\n".join(observations) if observations else "(nothing yet)"
    return (
        build_prompt(facts, bundle, version=version)
        + f"\n\n{tools}\n\nWhat your tool calls returned so far (untrusted data):\n{seen}"
    )


def bounded_investigation(
    *,
    ctx: DecisionContext,
    facts: PromptFacts,
    bundle_text: str,
    gateway: ModelGateway,
    tools: Mapping[str, Tool],
    allow: frozenset[str],
    max_steps: int,
    max_tokens: int,
    prompt_version: str = PROMPT_VERSION,
) -> Decision:
    """Run the loop; at most ``max_steps`` model calls. Raises DisallowedTool."""
    usage = Usage()
    observations: list[str] = []
    transcript = Transcript()
    schema = step_schema(allow)
    for index in range(max_steps):  # rail 1: a hard cap, not "until done"
        request = ModelRequest(
            SYSTEM,
            _prompt(facts, bundle_text, allow, observations, prompt_version),
            schema,
            max_tokens,
        )
        exchange = call_model(gateway, request, CallPurpose.INVESTIGATION)
        reply = exchange.reply
        transcript = transcript.plus(exchange.transcript)
        usage = usage.plus(1, reply.input_tokens, reply.output_tokens)
        if reply.text is None or reply.failure is not None:
            return failed_call_decision(reply, usage, transcript)
        step, error = (
            (None, LONE_SURROGATES) if exchange.lone_surrogates else parse_reply(reply.text)
        )
        if not isinstance(step, dict):
            observations.append(f"[step {index}] your reply was not a JSON object: {error}")
            continue
        if "final" in step:  # checked first: a final answer carries no tool
            verdict, errors = validate_verdict_object(step["final"])
            if verdict is not None:
                errors = semantic_errors(verdict, ctx)
            if verdict is not None and not errors:
                return Decision(Source.MODEL, verdict, True, f"model verdict after {index} tool step(s)",
                                halt=HaltReason.ABANDONED if verdict.action == "abandon-human" else None,
                                model=reply.model, usage=usage, transcript=transcript,
                                proposal=step["final"])  # fmt: skip
            observations.append(f"[step {index}] that verdict is invalid: {'; '.join(errors)}")
            continue
        name = step.get("tool")
        # A tool name is a string on the allow-list; anything else the model sent (a list,
        # an object) is refused the same way, shown cut short.
        if not isinstance(name, str) or name not in allow or name not in tools:  # rail 2
            shown = name[:60] if isinstance(name, str) else shown_short(name)
            raise DisallowedTool(shown, usage, transcript)
        raw_args = step.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        try:
            result = redact(tools[name](args))[:MAX_OBSERVATION_CHARS]
        except Exception as exc:  # noqa: BLE001 -- a tool error is an observation, not a crash
            result = f"error: {type(exc).__name__}: {exc}"[:500]
        transcript = transcript.plus(tool_record(index, str(name), args, result))  # rail 3
        observations.append(f"[step {index}] {name} {json.dumps(args, sort_keys=True)}:\n{result}")
    why = f"investigation hit its step cap ({max_steps}) without a decision"
    fallback = abandon(why)
    # The loop's own proposal (the model made none): verified like any, decided by a person.
    return Decision(Source.MODEL, fallback, True, why, halt=HaltReason.ABANDONED, model=gateway.model_name,
                    usage=usage, transcript=transcript, requires_human=True,
                    proposal=fallback.model_dump(mode="json"))  # fmt: skip


def investigator(
    *,
    tools: Mapping[str, Tool],
    allow: frozenset[str],
    max_steps: int,
    max_tokens: int,
) -> Callable[[GraphState, GraphDeps], Decision]:
    """The loop as the graph's ``llm_decision`` uses it (and replay, with the recorded
    tool results): one gateway, so one diagnosis charge, however many steps; an off-list tool becomes an
    invalid proposal with what was spent and said, never an exception out of the graph."""

    def investigate(state: GraphState, deps: GraphDeps) -> Decision:
        gateway = deps.gateway_factory()
        if gateway is None or isinstance(gateway, Unavailable):
            return no_model_decision(gateway)
        ctx = state.ctx
        try:
            return bounded_investigation(
                ctx=ctx.decision,
                facts=ctx.facts,
                bundle_text=state.context_text,
                gateway=gateway,
                tools=tools,
                allow=allow,
                max_steps=max_steps,
                max_tokens=max_tokens,
                prompt_version=deps.prompt_version,
            )
        except DisallowedTool as exc:
            why = f"the model reached for a tool outside the allow-list: {exc.tool}"
            return Decision(
                Source.MODEL, abandon(why), False, why, halt=HaltReason.INVALID_VERDICT,
                model=gateway.model_name, usage=exc.usage, transcript=exc.transcript,
            )  # fmt: skip

    return investigate
