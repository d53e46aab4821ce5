"""The live evaluation: the configured model asked about every case the deterministic
layers would send to it, under a cost cap.

The cap is never exceeded: before each diagnosis its worst case is priced — the prompt's
tokens (bytes/4, rounded up, with the system prompt and schema) plus ``max_tokens`` of
output, for the call and every re-ask it may need — and the evaluation stops before a
diagnosis whose worst case would take the spend past the cap. A model without a price
cannot be capped, so it is refused before any call.

The decision goes through ``diagnose.ask_model`` — the very validation a run uses — so an
invalid reply counts as the ``abandon-human`` it becomes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field

from orchestrator.domain.config import PriceConfig
from orchestrator.domain.errors import UsageError
from orchestrator.domain.proposals import facts_for
from orchestrator.domain.validation import Frozen
from orchestrator.domain.verdicts import verdict_json_schema
from orchestrator.eval import layers
from orchestrator.eval.corpus import Case
from orchestrator.eval.offline import BYTES_PER_TOKEN, CaseResult, percentile
from orchestrator.recovery.diagnose import ask_model
from orchestrator.recovery.gateway import ModelGateway
from orchestrator.recovery.prompt import SYSTEM, build_prompt


class LiveResult(Frozen):
    id: str
    action: str
    valid: bool
    agreed: bool  # a valid verdict whose action the label accepts
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    reason: str
    # The verdict as validated (what the learning pass proposes when the label accepts it).
    verdict: dict[str, Any] | None = None


class LiveSummary(Frozen):
    model: str
    max_cost_usd: float
    asked: int
    eligible: int  # cases the deterministic layers would send to the model
    agreement: float | None
    spent_usd: float
    cost_per_diagnosis_usd: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    # Why the evaluation stopped before asking every eligible case (the cap), or None.
    stopped: str | None
    results: tuple[LiveResult, ...]


def _tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def worst_case_usd(prompt: str, price: PriceConfig, *, max_tokens: int, max_reasks: int) -> float:
    """What one diagnosis may cost at most: every call of it at full length."""
    schema = json.dumps(verdict_json_schema())
    per_call = price.cost_usd(_tokens(SYSTEM) + _tokens(prompt) + _tokens(schema), max_tokens)
    return per_call * (1 + max_reasks)


class LiveSettings(Frozen):
    max_cost_usd: Annotated[float, Field(gt=0)]
    max_tokens: Annotated[int, Field(ge=1)]
    max_reasks: Annotated[int, Field(ge=0)]


def run_live(
    cases: Sequence[Case],
    offline: Sequence[CaseResult],
    *,
    gateway: ModelGateway,
    prices: Mapping[str, PriceConfig],
    settings: LiveSettings,
    clock: Callable[[], float],
) -> LiveSummary:
    """Ask the model about each case the offline run sends to it, in corpus order, until
    the next diagnosis could take the spend past ``settings.max_cost_usd``."""
    price = prices.get(gateway.model_name)
    if price is None:
        raise UsageError(
            f"eval --live: no price for model {gateway.model_name!r} under [prices] in the "
            "config: without one the cost cap cannot be enforced"
        )
    by_id = {case.label.id: case for case in cases}
    eligible = [r for r in offline if r.model_call_made]
    spent = 0.0
    stopped: str | None = None
    results: list[LiveResult] = []
    for result in eligible:
        label = by_id[result.id].label
        ctx = layers.decision_context(label)
        facts = facts_for(ctx, "CORPUS-1", "bug-fix")
        prompt = build_prompt(facts, result.bundle_text)
        worst = worst_case_usd(
            prompt, price, max_tokens=settings.max_tokens, max_reasks=settings.max_reasks
        )
        if spent + worst > settings.max_cost_usd:
            stopped = (
                f"stopped before {result.id}: its worst case ${worst:.4f} would take the "
                f"spend ${spent:.4f} past the cap ${settings.max_cost_usd:.4f}"
            )
            break
        started = clock()
        decision = ask_model(
            ctx=ctx, facts=facts, bundle_text=result.bundle_text,
            gateway_factory=lambda: gateway, max_reasks=settings.max_reasks,
            max_tokens=settings.max_tokens,
        )  # fmt: skip
        latency = clock() - started
        usage = decision.usage
        cost = price.cost_usd(usage.input_tokens, usage.output_tokens)
        spent += cost
        action = decision.verdict.action
        results.append(
            LiveResult(
                id=result.id,
                action=action,
                valid=decision.valid,
                agreed=decision.valid and action in label.acceptable_actions,
                calls=usage.calls,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=round(cost, 6),
                latency_s=round(latency, 3),
                reason=decision.reason[:300],
                verdict=decision.verdict.model_dump(mode="json") if decision.valid else None,
            )
        )
    latencies = [round(r.latency_s * 1000) for r in results]
    return LiveSummary(
        model=gateway.model_name,
        max_cost_usd=settings.max_cost_usd,
        asked=len(results),
        eligible=len(eligible),
        agreement=round(sum(r.agreed for r in results) / len(results), 4) if results else None,
        spent_usd=round(spent, 6),
        cost_per_diagnosis_usd=round(spent / len(results), 6) if results else None,
        latency_p50_s=percentile(latencies, 50) / 1000 if results else None,
        latency_p95_s=percentile(latencies, 95) / 1000 if results else None,
        stopped=stopped,
        results=tuple(results),
    )
