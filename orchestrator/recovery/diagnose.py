"""The sandwich. ``decide`` returns exactly one Decision for one failure:

    clone missing?            → synthetic abandon-human        (no model)
    playbook knows it?        → playbook verdict               (no model)
    diagnosis cap spent?      → cap_exhausted                  (no model)
    no model configured?      → synthetic abandon-human        (no model)
    otherwise: one model call (+ at most ``max_reasks`` re-asks after a reply that
    failed validation), validated for shape and meaning. The gateway is created
    (``gateway_factory``) only on that last path, and the gateway the app hands out
    charges the diagnosis cap before its first live call (``app/journaled_calls.py``).

Whatever the gateway returns, or raises, the result is a valid verdict: anything else
becomes ``abandon-human`` with the reason. Nothing here executes anything or writes
anything; the only side effect is through the injected gateway factory and its gateway.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.domain.infra_wait import model_call_waits_out, waits_out
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.playbook import PlaybookMatch
from orchestrator.domain.proposals import Caps, Failure, PromptFacts, Source
from orchestrator.domain.transcripts import CallError, CallPurpose
from orchestrator.domain.verdicts import (
    AbandonHumanVerdict,
    DecisionContext,
    RetryVerdict,
    Verdict,
    abandon,
    verdict_json_schema,
)
from orchestrator.domain.vocabulary import semantic_errors
from orchestrator.recovery.gateway import (
    GatewayFactory,
    ModelReply,
    ModelRequest,
    Unavailable,
)
from orchestrator.recovery.prompt import PROMPT_VERSION, SYSTEM, build_prompt
from orchestrator.recovery.transcript import Transcript, call_model
from orchestrator.recovery.verdict import (
    LONE_SURROGATES,
    parse_reply,
    parse_verdict,
    validate_verdict_object,
)


@dataclass(frozen=True)
class Usage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def plus(self, calls: int, input_tokens: int, output_tokens: int) -> Usage:
        return Usage(
            self.calls + calls, self.input_tokens + input_tokens, self.output_tokens + output_tokens
        )


@dataclass(frozen=True)
class Decision:
    """One decision: the verdict to execute and everything needed to audit it."""

    source: Source
    verdict: Verdict
    valid: bool  # False: ``verdict`` is the abandon-human that replaced an invalid one
    reason: str
    halt: HaltReason | None = None  # the typed reason, when the verdict ends the ticket
    errors: tuple[str, ...] = ()
    playbook_entry: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    # Every call made for this decision, with the (scrubbed) reply texts.
    transcript: Transcript = field(default_factory=Transcript)
    cap_exhausted: bool = False
    # The proposal as it came (parsed JSON, or the playbook's object), before validation:
    # the verification node checks it independently of how it was turned into ``verdict``.
    proposal: object | None = None
    # The investigation loop hit its step cap: whatever the confidence, a person decides.
    requires_human: bool = False
    # Not decided: the model may not be asked now (why), but may be later. Such a
    # decision is never persisted or carried out; the run waits to be decided again.
    deferred: str | None = None


def _checked(value: object, ctx: DecisionContext) -> tuple[Verdict | None, list[str]]:
    verdict, errors = validate_verdict_object(value)
    if verdict is None:
        return None, errors
    meaning = semantic_errors(verdict, ctx)
    return (None, meaning) if meaning else (verdict, [])


def call_failed(reply: ModelReply) -> str:
    """Why a call gave no usable answer, in the words the decision's reason uses."""
    if reply.error_kind is CallError.GATEWAY_RAISED:
        return f"model gateway failed: {reply.error}"
    return f"model call failed: {reply.error or 'no text in reply'}"


def failed_call_decision(reply: ModelReply, usage: Usage, transcript: Transcript) -> Decision:
    """A call that gave no usable answer: the model provider's outage (after the
    gateway's own retries) waits for a later batch to decide (``infra_unavailable``:
    ``waiting-infra``, issue 43); any other failure stops the run (``model_error``)."""
    why = call_failed(reply)
    halt = HaltReason.MODEL_ERROR
    if model_call_waits_out(reply.failure):
        why += ": the model provider is unavailable; not decided now, the next batch decides it"
        halt = HaltReason.INFRA_UNAVAILABLE
    return Decision(
        Source.MODEL, abandon(why), False, why, halt=halt, model=reply.model, usage=usage,
        transcript=transcript,
    )  # fmt: skip


def _halt_for(verdict: Verdict) -> HaltReason | None:
    return HaltReason.ABANDONED if isinstance(verdict, AbandonHumanVerdict) else None


def no_model_decision(unavailable: Unavailable | None = None) -> Decision:
    """No call: no model is configured, or the factory says why not (a spent budget)."""
    if unavailable is not None and unavailable.defer:
        why = f"{unavailable.reason}: not decided now; the next batch decides it"
        return Decision(
            Source.SYNTHETIC, abandon(why), True, why, halt=HaltReason.BUDGET_SPENT,
            deferred=unavailable.reason,
        )  # fmt: skip
    if unavailable is not None:
        why = unavailable.reason
        halt = unavailable.halt or HaltReason.BUDGET_SPENT
        return Decision(Source.SYNTHETIC, abandon(why), True, why, halt=halt)
    why = "no model configured"
    return Decision(Source.SYNTHETIC, abandon(why), True, why, halt=HaltReason.NO_MODEL)


# Infrastructure failures only a person can fix (a retry can outlast the others).
NEEDS_A_PERSON = {
    "auth_error": HaltReason.AUTH_ERROR,
    "quota_exhausted": HaltReason.QUOTA_EXHAUSTED,
}


# The machine ran out of disk, quota or memory: the same attempt on the same machine would
# fail the same way, so a person frees what ran out (and resumes); no retry is spent.
FREED_BY_A_PERSON = {"resource_exhausted": HaltReason.RESOURCE_EXHAUSTED}


# Failures of the machine's configuration: the run fails at once (no retry can install a
# program), and ``orchestrator resume`` continues it once a person has fixed it.
FAILS_AS_CONFIGURED = {"config_error": HaltReason.CONFIG_ERROR}


def infra_decision(failure: Failure, caps: Caps) -> Decision:
    """Infrastructure failures never go to the model: a deterministic verdict. Those only
    a person can fix stop the run with the reason; the rest (a rate limit, an outage,
    the network, a timeout, a crashed engine) retry after a back-off under the infra cap."""
    cls = failure.infra or "engine_error"
    said = f": {failure.infra_detail}" if failure.infra_detail else ""
    if cls in FAILS_AS_CONFIGURED:
        why = (
            f"configuration error ({cls}{said}): install the program or fix the stage's "
            "command, PATH or sandbox settings, then `orchestrator resume` the run; retrying "
            "cannot help"
        )
        return Decision(Source.INFRA, abandon(why), True, why, halt=FAILS_AS_CONFIGURED[cls])
    if cls in FREED_BY_A_PERSON:
        why = (
            f"infrastructure failure ({cls}{said}): a person must free disk, quota or memory "
            "on this machine, then `orchestrator resume` the run; retrying cannot help"
        )
        return Decision(Source.INFRA, abandon(why), True, why, halt=FREED_BY_A_PERSON[cls])
    if cls in NEEDS_A_PERSON:
        why = f"infrastructure failure ({cls}{said}): a person must fix it; retrying cannot"
        return Decision(Source.INFRA, abandon(why), True, why, halt=NEEDS_A_PERSON[cls])
    if caps.infra_retries_used >= caps.max_infra_retries and waits_out(cls):
        # The world's failure, not the ticket's: the run waits for the next batch
        # (``waiting-infra``), which goes on with its caps untouched (issue 43).
        why = (
            f"infrastructure failure ({cls}{said}) through this batch's back-off "
            f"({caps.infra_retries_used}/{caps.max_infra_retries} retries): waiting for the "
            "next batch"
        )
        return Decision(Source.INFRA, abandon(why), True, why, halt=HaltReason.INFRA_UNAVAILABLE)
    if caps.infra_retries_used >= caps.max_infra_retries:
        why = (
            f"infrastructure failure ({cls}{said}); infrastructure retries spent "
            f"({caps.infra_retries_used}/{caps.max_infra_retries} for this ticket)"
        )
        return Decision(Source.INFRA, abandon(why), True, why, halt=HaltReason.CAP_EXHAUSTED)
    why = f"infrastructure failure ({cls}{said}): retry after a back-off"
    verdict = RetryVerdict(action="retry", summary=why[:2000])
    return Decision(Source.INFRA, verdict, True, why, proposal=verdict.model_dump(mode="json"))


def precheck(
    *,
    ctx: DecisionContext,
    failure: Failure,
    clone_exists: bool,
    caps: Caps,
    known: PlaybookMatch | None = None,
) -> Decision | None:
    """Layer 1: a decision that needs no model, or None when the model must be asked.
    ``known``: the promoted playbook entry that matched the failure (``Playbook.match``),
    resolved by the caller so the decision's inputs keep it."""
    if failure.infra is not None:
        return infra_decision(failure, caps)
    if not clone_exists:
        why = f"the failed stage's clone {ctx.clone_dir} is missing: nothing to inspect or retry safely"
        if failure.stage_said:
            # The stage's own words first: the missing clone is only what its failure left.
            why = (
                f"stage {ctx.failing_stage!r} failed: {failure.stage_said} (its clone "
                f"{ctx.clone_dir} does not exist: nothing to inspect or retry safely)"
            )
        return Decision(
            Source.SYNTHETIC, abandon(why), True, why, halt=HaltReason.PRECONDITION_FAILED
        )

    if known is not None:
        entry, proposal = known.entry, known.decision
        verdict, errors = _checked(proposal, ctx)
        if verdict is not None:
            return Decision(
                Source.PLAYBOOK, verdict, True, f"known failure: playbook entry {entry!r}",
                halt=_halt_for(verdict), playbook_entry=entry, proposal=proposal,
            )  # fmt: skip
        why = f"playbook entry {entry!r} produced an invalid verdict"
        return Decision(
            Source.PLAYBOOK, abandon(why), False, why, halt=HaltReason.INVALID_VERDICT,
            errors=tuple(errors), playbook_entry=entry, proposal=proposal,
        )  # fmt: skip

    if caps.spent:
        why = f"diagnosis cap spent ({caps.diagnoses_used}/{caps.max_diagnoses} for this ticket)"
        return Decision(
            Source.SYNTHETIC, abandon(why), True, why, halt=HaltReason.CAP_EXHAUSTED,
            cap_exhausted=True,
        )  # fmt: skip
    return None


def ask_model(
    *,
    ctx: DecisionContext,
    facts: PromptFacts,
    bundle_text: str,
    gateway_factory: GatewayFactory,
    max_reasks: int,
    max_tokens: int,
    prompt_version: str = PROMPT_VERSION,
) -> Decision:
    """Layer 2: one call (+ bounded re-asks), validated."""
    # Built only now: constructing a real gateway imports the SDK (most of a second), and
    # the factory charges the diagnosis before it hands one out.
    gateway = gateway_factory()
    if gateway is None or isinstance(gateway, Unavailable):
        return no_model_decision(gateway)
    usage = Usage()
    last_proposal: object | None = None
    transcript = Transcript()
    errors: list[str] = []
    schema = verdict_json_schema()
    for attempt in range(1 + max_reasks):
        prompt = build_prompt(
            facts, bundle_text, validation_errors=errors or None, version=prompt_version
        )
        request = ModelRequest(
            system=SYSTEM, prompt=prompt, json_schema=schema, max_tokens=max_tokens
        )
        purpose = CallPurpose.REASK if attempt else CallPurpose.DIAGNOSIS
        exchange = call_model(gateway, request, purpose)
        reply = exchange.reply
        transcript = transcript.plus(exchange.transcript)
        usage = usage.plus(1, reply.input_tokens, reply.output_tokens)
        if reply.failure is not None or reply.text is None:
            return failed_call_decision(reply, usage, transcript)
        if exchange.lone_surrogates:
            # Said the same way live and on replay (whose stored text has U+FFFD there).
            last_proposal, verdict = None, None
            errors = [LONE_SURROGATES]
        else:
            last_proposal, _ = parse_reply(reply.text)
            verdict, errors = parse_verdict(reply.text)
        if verdict is not None:
            errors = semantic_errors(verdict, ctx)
            if not errors:
                return Decision(
                    Source.MODEL, verdict, True, "model verdict", halt=_halt_for(verdict),
                    model=reply.model, usage=usage, transcript=transcript,
                    proposal=last_proposal,
                )  # fmt: skip
    why = f"model reply invalid after {usage.calls} attempt(s): {'; '.join(errors)[:500]}"
    return Decision(
        Source.MODEL, abandon(why), False, why, halt=HaltReason.INVALID_VERDICT,
        errors=tuple(errors), model=gateway.model_name, usage=usage, transcript=transcript,
        proposal=last_proposal,
    )  # fmt: skip


def decide(
    *,
    ctx: DecisionContext,
    failure: Failure,
    facts: PromptFacts,
    bundle_text: str,
    clone_exists: bool,
    caps: Caps,
    gateway_factory: GatewayFactory,
    max_reasks: int,
    max_tokens: int,
    prompt_version: str = PROMPT_VERSION,
    known: PlaybookMatch | None = None,
) -> Decision:
    """The whole sandwich filling in one call: ``precheck``, else ``ask_model``."""
    early = precheck(ctx=ctx, failure=failure, clone_exists=clone_exists, caps=caps, known=known)
    if early is not None:
        return early
    return ask_model(
        ctx=ctx, facts=facts, bundle_text=bundle_text, gateway_factory=gateway_factory,
        max_reasks=max_reasks, max_tokens=max_tokens, prompt_version=prompt_version,
    )  # fmt: skip
