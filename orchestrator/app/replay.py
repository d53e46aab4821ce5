"""Replay a past decision: re-run the recovery graph on the persisted inputs with the
persisted model replies, and compare today's proposal and dispatch with the persisted ones.

    verdict file ─► RecoveryContext (``inputs`` + the bundle file, reloaded byte-exactly)
                 ─► run_graph with replay deps: the gateway answers with the persisted
                    replies in order, the judge with its persisted answer; charge, memory
                    and ledger do nothing; thresholds, re-asks and sampling are today's
                 ─► field-by-field comparison of the two proposals, and of what the
                    substrate would do with each (``plan_dispatch``)

Pure apart from reading files: no model is reached (there is no real gateway here), no
process starts and nothing is written — replay is given no runner, no services and no
substrate ``apply``; it only *states* what the substrate would do.

What cannot be reproduced exactly is said, per verdict, in ``limitations``: tool results
of an investigation (the ledger keeps only their digests), replies stored after redaction
or cut at the storage cap, a prompt that changed since. Per-call token counts are not
persisted (only totals), so the replayed replies carry the totals on the first of them:
the sums in the evidence are what is compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from orchestrator.app.investigation_tools import clone_tools
from orchestrator.app.substrate import Dispatch, plan_dispatch
from orchestrator.domain.config import Config, LoadedConfig
from orchestrator.domain.errors import OrchestratorError, StateError, UsageError
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.recovery.context import ContextBundle
from orchestrator.recovery.diagnose import (
    MAX_STORED_REPLY_CHARS,
    Decision,
    Source,
)
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, Unavailable
from orchestrator.recovery.graph import (
    GraphDeps,
    GraphState,
    Proposal,
    RecoveryContext,
    context_from_json,
    run_graph,
)
from orchestrator.recovery.investigate import Step, Tool, investigator
from orchestrator.recovery.prompt import PROMPT_VERSION
from orchestrator.storage.decisions import VerdictRecord, read_verdict
from orchestrator.storage.layout import verdict_files
from orchestrator.storage.ledger import Ledger, inputs_hash, ledger_path
from orchestrator.storage.runs import RunRecord, RunStore, StageOverride

__all__ = [
    "Difference",
    "Dispatch",
    "ReplayGateway",
    "ReplayResult",
    "compare",
    "plan_dispatch",
    "replay",
    "replay_verdict",
    "verdict_paths",
]

ABSENT: Final = "<absent>"
REPLAY_MODEL: Final = "replay"
NO_REPLY: Final = "replay: no persisted reply for this call"
# How diagnose/_ask and the investigation word a failed call; replay reproduces the call.
GATEWAY_FAILED: Final = "model gateway failed: "
CALL_FAILED: Final = "model call failed: "
DISALLOWED: Final = "the model reached for a tool outside the allow-list: "
# The stored cap of an investigation step's reply (bounded_investigation keeps 4000).
INVESTIGATION_REPLY_CHARS: Final = 4000
_INVESTIGATION_REASON = re.compile(
    r"^(model verdict after \d+ tool step|investigation hit its step cap"
    r"|the model reached for a tool outside the allow-list)"
)
_PLACEHOLDER_RESULT: Final = "(replay: tool results are not stored; nothing was read)"


@dataclass(frozen=True)
class Difference:
    field: str
    then: Any
    now: Any


@dataclass(frozen=True)
class ReplayResult:
    number: int
    decision_id: str
    identical: bool
    differences: list[Difference]
    limitations: list[str]
    calls_replayed: int
    # Today's decision, for the one-line summary.
    action: str = ""
    routing: str = ""
    dispatch: Dispatch | None = None
    # False: nothing could be compared (``limitations`` says why); never "identical".
    replayable: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "decision_id": self.decision_id,
            "identical": self.identical,
            "differences": [
                {"field": d.field, "then": d.then, "now": d.now} for d in self.differences
            ],
            "limitations": list(self.limitations),
            "calls_replayed": self.calls_replayed,
            "action": self.action,
            "routing": self.routing,
            "dispatch": self.dispatch.as_dict() if self.dispatch else None,
            "replayable": self.replayable,
        }


# ---- the replay gateway -----------------------------------------------------------------

ScriptStep = ModelReply | BaseException


@dataclass
class ReplayGateway:
    """Answers from persisted data, in order. Never reaches a model. A call past the
    script is answered with an error reply and counted: a difference, not a crash."""

    script: list[ScriptStep]
    model_name: str = REPLAY_MODEL
    calls: int = 0
    overrun: int = 0

    def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        if not self.script:
            self.overrun += 1
            return ModelReply(text=None, model=self.model_name, error=NO_REPLY)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    @property
    def unused(self) -> int:
        return len(self.script)


def _named_exception(name: str) -> Exception:
    """An exception whose class has the persisted name: diagnose records only
    ``type(exc).__name__``, so this reproduces its reason exactly."""
    if not name.isidentifier():
        name = "ReplayedGatewayError"
    error: Exception = type(name, (Exception,), {})(f"replayed {name}")
    return error


def _judge_evidence(verdict: VerdictRecord) -> dict[str, Any]:
    return _evidence(verdict.proposal, "judge")


def _evidence(proposal: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for entry in proposal.get("evidence") or ():
        if isinstance(entry, dict) and entry.get("kind") == kind:
            return entry
    return {}


def _judge_calls_in_usage(verdict: VerdictRecord) -> int:
    judge = _judge_evidence(verdict)
    # A judge call that raised is not in the usage (Usage() stays empty); any other is.
    return 1 if judge.get("sampled") and judge.get("reason") != "judge failed" else 0


def _refused_tool_replies(
    verdict: VerdictRecord, trace_rows: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """An investigation refused for an off-list tool keeps none of its replies (the
    decision is built without them): its allowed steps are in the ledger's trace and the
    refused tool is in the reason, which is all the loop acted on."""
    if verdict.replies or not verdict.reason.startswith(DISALLOWED):
        return ()
    steps = [
        {"tool": row["decision"].get("tool"), "args": row["decision"].get("args", {})}
        for row in trace_rows
        if isinstance(row.get("decision"), dict)
    ]
    steps.append({"tool": verdict.reason.removeprefix(DISALLOWED)})
    return tuple(json.dumps(step) for step in steps)


def decision_script(
    verdict: VerdictRecord, trace_rows: Sequence[Mapping[str, Any]] = ()
) -> list[ScriptStep]:
    """The decision's calls as the graph saw them: each persisted reply, plus the failed
    call the reason names (an exception, or a reply with an error)."""
    model = verdict.model or REPLAY_MODEL
    texts = verdict.replies or _refused_tool_replies(verdict, trace_rows)
    steps: list[ScriptStep] = [
        ModelReply(text=text, model=model, stop_reason="end_turn") for text in texts
    ]
    calls = verdict.usage.calls - _judge_calls_in_usage(verdict)
    if verdict.halt == HaltReason.MODEL_ERROR:
        if verdict.reason.startswith(GATEWAY_FAILED):
            steps.append(_named_exception(verdict.reason.removeprefix(GATEWAY_FAILED)))
        elif verdict.reason.startswith(CALL_FAILED):
            error = verdict.reason.removeprefix(CALL_FAILED)
            last = steps[-1] if steps else None
            if calls <= len(verdict.replies) and isinstance(last, ModelReply):
                # The reply had text (so it was stored) and an error: one call, not two.
                steps[-1] = replace(last, error=error)
            else:
                steps.append(ModelReply(text=None, model=model, error=error))
    # Only totals are persisted: the first reply carries them, the sums then agree.
    first = next((i for i, s in enumerate(steps) if isinstance(s, ModelReply)), None)
    if first is not None:
        reply = steps[first]
        assert isinstance(reply, ModelReply)
        steps[first] = replace(
            reply,
            input_tokens=verdict.usage.input_tokens,
            output_tokens=verdict.usage.output_tokens,
        )
    return steps


def judge_gateway(verdict: VerdictRecord) -> ReplayGateway | Unavailable | None:
    """The judge's persisted answer; None where no judge was configured, Unavailable
    (with the persisted reason) where a spent budget refused it."""
    judge = _judge_evidence(verdict)
    model = verdict.model or REPLAY_MODEL
    if not judge.get("sampled"):
        reason = str(judge.get("reason") or "")
        if reason == "no judge configured":
            return None
        if reason:
            return Unavailable(reason)
        return ReplayGateway([], model)  # none persisted: a call today is an overrun
    reason = str(judge.get("reason", ""))
    agrees = judge.get("agrees")
    step: ScriptStep
    if reason == "judge failed":
        step = RuntimeError("replayed judge failure")
    elif reason == "judge reply was not valid" and agrees is None:
        step = ModelReply(text="", model=model, stop_reason="end_turn")
    else:
        answer = json.dumps({"agree": agrees, "reason": reason})
        step = ModelReply(text=answer, model=model, stop_reason="end_turn")
    return ReplayGateway([step], model)


# ---- investigation ----------------------------------------------------------------------


def used_investigation(verdict: VerdictRecord, trace_rows: list[dict[str, Any]]) -> bool:
    return bool(trace_rows) or bool(_INVESTIGATION_REASON.match(verdict.reason))


def _placeholder_tools() -> dict[str, Tool]:
    # The real tools' names (building them reads and runs nothing); results are not stored.
    def placeholder(args: Mapping[str, Any]) -> str:
        return _PLACEHOLDER_RESULT

    return {name: placeholder for name in clone_tools(Path("/nonexistent"), {})}


def _replay_investigator(
    config: Config, steps: list[Step]
) -> Callable[[GraphState, GraphDeps], Decision]:
    """The same loop the run used, with placeholder tools and the trace kept in memory.
    Tool results reach only the prompts, which a replay does not send, so the decision
    depends on the replies alone."""
    return investigator(
        tools=_placeholder_tools(),
        allow=frozenset(config.diagnosis.tools),
        max_steps=config.diagnosis.max_steps,
        max_tokens=config.model.max_tokens,
        trace=lambda ctx, step: steps.append(step),
    )


def _trace_differences(rows: list[dict[str, Any]], steps: list[Step]) -> list[Difference]:
    out = []
    for index in range(max(len(rows), len(steps))):
        then = rows[index].get("decision", {}) if index < len(rows) else {}
        now = steps[index] if index < len(steps) else None
        for name in ("tool", "args"):
            before = then.get(name, ABSENT)
            after = (getattr(now, name) if name == "tool" else dict(now.args)) if now else ABSENT
            if before != after:
                out.append(Difference(f"investigation.step[{index}].{name}", before, after))
    return out


# ---- dispatch ---------------------------------------------------------------------------


def record_at_decision(record: RunRecord, ctx: RecoveryContext) -> RunRecord:
    """The run as the decision saw it, as far as dispatch cares: the engine and model the
    code stage was on. Later verdicts may have overridden them since."""
    decision = ctx.decision
    overrides = {k: v for k, v in record.overrides.items() if k != decision.code_stage}
    if decision.current_engine is not None:
        overrides[decision.code_stage] = StageOverride(
            engine=decision.current_engine, model=decision.current_model
        )
    return record.model_copy(update={"overrides": overrides})


# ---- comparison -------------------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def proposal_fields(proposal: Mapping[str, Any]) -> dict[str, Any]:
    """A proposal as named fields: ``action``, ``verdict.<field>``, ``routing``,
    ``confidence``, ``reasoning[i]``, ``evidence.<kind>.<key>``."""
    out: dict[str, Any] = {
        "decision_id": proposal.get("decision_id"),
        "capability": proposal.get("capability"),
    }
    action = dict(proposal.get("action") or {})
    out["action"] = action.pop("action", None)
    _flatten(action, "verdict", out)
    out["routing"] = proposal.get("routing")
    out["confidence"] = proposal.get("confidence")
    for index, line in enumerate(proposal.get("reasoning") or ()):
        out[f"reasoning[{index}]"] = line
    for entry in proposal.get("evidence") or ():
        fields = dict(entry)
        _flatten(fields, f"evidence.{fields.pop('kind', '?')}", out)
    return out


def compare(then: Mapping[str, Any], now: Mapping[str, Any], prefix: str = "") -> list[Difference]:
    """Field by field, in the order the fields appear (then's first); exact equality —
    a confidence of 0.7222 is not 0.72221."""
    keys = list(then) + [k for k in now if k not in then]
    return [
        Difference(f"{prefix}{key}", then.get(key, ABSENT), now.get(key, ABSENT))
        for key in keys
        if then.get(key, ABSENT) != now.get(key, ABSENT)
        # 1 == 1.0 == True in Python; a changed type is a change.
        or type(then.get(key, ABSENT)) is not type(now.get(key, ABSENT))
    ]


def _dispatch_fields(dispatch: Dispatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _flatten(dispatch.as_dict(), "", out)
    return out


# ---- one verdict ------------------------------------------------------------------------


def _bundle_text(verdict: VerdictRecord, limitations: list[str]) -> tuple[str, str | None]:
    """The rendered bundle and the hash of the file as stored (None when unreadable)."""
    if verdict.bundle_path is None:
        limitations.append("no bundle was persisted; replayed without it (only prompts use it)")
        return "", None
    path = Path(verdict.bundle_path)
    try:
        raw = path.read_text(encoding="utf-8")
        bundle = ContextBundle.model_validate_json(raw)
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        why = type(exc).__name__ if not isinstance(exc, OSError) else exc.strerror
        limitations.append(
            f"bundle {path} is unreadable ({why}); replayed without it (only prompts use it)"
        )
        return "", None
    return bundle.render(), inputs_hash(raw)


def _limitations(verdict: VerdictRecord, investigated: bool, config: Config) -> list[str]:
    notes = []
    source = _evidence(verdict.proposal, "source").get("source")
    if source == Source.MODEL and verdict.prompt_version != PROMPT_VERSION:
        notes.append(
            f"the prompt changed since ({verdict.prompt_version} → {PROMPT_VERSION}): the "
            "persisted replies answered the old prompt"
        )
    redactions = _evidence(verdict.proposal, "guardrail").get("redactions") or 0
    if redactions:
        notes.append(
            f"the replies were stored after the guardrail scrubbed them ({redactions} "
            "replacement(s)): replay reads the scrubbed text, so it finds nothing to scrub"
        )
    cap = INVESTIGATION_REPLY_CHARS if investigated else MAX_STORED_REPLY_CHARS
    for index, text in enumerate(verdict.replies):
        if len(text) >= cap:
            notes.append(f"reply {index + 1} was stored cut at {cap} characters")
    if investigated and verdict.reason.startswith(DISALLOWED) and not verdict.replies:
        notes.append(
            "the investigation was refused for an off-list tool, which keeps no replies: "
            "its steps were rebuilt from the ledger's trace and the reason"
        )
    if investigated:
        notes.append(
            "cannot replay an investigation's tool results (the ledger keeps only their "
            "digests): replayed from the persisted replies with placeholder results, "
            "which only the prompts would have shown; the steps are compared with the trace"
        )
        if config.diagnosis.mode != "investigate":
            notes.append("decided by an investigation, but today's [diagnosis] mode is single")
    elif source == Source.MODEL and verdict.usage.calls and config.diagnosis.mode == "investigate":
        notes.append("decided by a single call, but today's [diagnosis] mode is investigate")
    return notes


def replay_verdict(
    verdict: VerdictRecord,
    path: Path,
    record: RunRecord,
    config: Config,
    trace_rows: list[dict[str, Any]],
) -> ReplayResult:
    """Re-run the graph for one persisted decision and compare."""
    if not verdict.inputs:
        return _not_replayable(
            verdict,
            "written before verdict files recorded their inputs: cannot be replayed",
        )
    investigated = used_investigation(verdict, trace_rows)
    limitations = _limitations(verdict, investigated, config)
    bundle_text, bundle_hash = _bundle_text(verdict, limitations)
    try:
        ctx = context_from_json(verdict.inputs, bundle_text)
        then = Proposal.model_validate(verdict.proposal)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(
            f"state error: {path}: the persisted decision cannot be replayed: "
            f"{type(exc).__name__}: {exc}"
        ) from None

    script = decision_script(verdict, trace_rows)
    gateway = ReplayGateway(list(script), verdict.model or REPLAY_MODEL)
    judge = judge_gateway(verdict)
    availability = model_availability(verdict, gateway)

    def gateway_factory() -> ModelGateway | Unavailable | None:
        return availability

    def judge_factory() -> ModelGateway | Unavailable | None:
        return judge

    steps: list[Step] = []
    deps = GraphDeps(
        gateway_factory=gateway_factory,
        charge=_nothing,
        thresholds=config.routing.by_action(),
        max_reasks=config.recovery.max_reasks,
        max_tokens=config.model.max_tokens,
        judge_sample_rate=config.judge.sample_rate,
        judge_factory=judge_factory,
        investigate=(
            _replay_investigator(config, steps) if config.diagnosis.mode == "investigate" else None
        ),
    )  # memory and ledger: the defaults, which write nothing
    state = run_graph(ctx, deps)
    now = state.proposal
    assert now is not None

    differences = []
    if bundle_hash is not None and bundle_hash != ctx.inputs_hash:
        differences.append(Difference("bundle.inputs_hash", ctx.inputs_hash, bundle_hash))
    # "then" as stored (not as re-validated): the comparison is with the file itself.
    differences += compare(
        proposal_fields(verdict.proposal), proposal_fields(now.model_dump(mode="json"))
    )
    persisted_calls = len(script) + (1 if _judge_evidence(verdict).get("sampled") else 0)
    judged = judge if isinstance(judge, ReplayGateway) else None
    calls = gateway.calls + (judged.calls if judged else 0)
    served = calls - gateway.overrun - (judged.overrun if judged else 0)
    if calls != persisted_calls or served != persisted_calls:
        differences.append(Difference("model_calls", persisted_calls, calls))
    if investigated or steps:
        differences += _trace_differences(trace_rows, steps)
    at_decision = record_at_decision(record, ctx)
    dispatch_then = plan_dispatch(then, config, at_decision)
    dispatch_now = plan_dispatch(now, config, at_decision)
    differences += compare(
        _dispatch_fields(dispatch_then), _dispatch_fields(dispatch_now), prefix="dispatch."
    )
    return ReplayResult(
        number=verdict.number,
        decision_id=verdict.decision_id,
        identical=not differences,
        differences=differences,
        limitations=limitations,
        calls_replayed=served,
        action=str(now.action.get("action")),
        routing=now.routing,
        dispatch=dispatch_now,
    )


def model_availability(
    verdict: VerdictRecord, gateway: ModelGateway
) -> ModelGateway | Unavailable | None:
    """What the gateway factory gave the graph then: no gateway (no model configured), a
    refusal (a spent batch budget, with its reason), or a gateway (here: ``gateway``).
    Availability is the environment's state, not the decision's: replay reproduces it."""
    if verdict.usage.calls == 0 and verdict.source == Source.SYNTHETIC:
        if verdict.halt == HaltReason.NO_MODEL:
            return None
        if verdict.halt == HaltReason.BUDGET_SPENT:
            return Unavailable(verdict.reason)
    return gateway


def _not_replayable(verdict: VerdictRecord, why: str) -> ReplayResult:
    return ReplayResult(
        number=verdict.number,
        decision_id=verdict.decision_id,
        identical=False,
        differences=[],
        limitations=[why],
        calls_replayed=0,
        action=verdict.action,
        routing=str(verdict.proposal.get("routing", "")),
        replayable=False,
    )


def _nothing() -> None:
    """A replay charges nothing: the original decision was charged when it was made."""


# ---- a run ------------------------------------------------------------------------------


def verdict_paths(store: RunStore, run_id: str) -> dict[int, Path]:
    """``runs/<run-id>.verdict-<n>.json`` by number: the files, not the run record's refs,
    so a decision persisted just before a crash is replayed too."""
    return {v.number: v.path for v in verdict_files(store.runs_dir, run_id=run_id)}


def _trace_rows(state_dir: Path, limitations: list[str]) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    try:
        for row in Ledger(ledger_path(state_dir)).rows():
            if row.get("kind") == "trace":
                rows.setdefault(str(row.get("decision_id")), []).append(row)
    except (OrchestratorError, OSError) as exc:
        limitations.append(f"the ledger is unreadable ({exc}): investigation steps not compared")
    return rows


def replay(
    store: RunStore, loaded: LoadedConfig, run_id: str, number: int | None
) -> list[ReplayResult]:
    """Replay every decision of ``run_id`` (or decision ``number``) against today's code
    and ``loaded`` config. Reads files; writes, executes and asks nothing."""
    record = store.load(run_id)
    paths = verdict_paths(store, run_id)
    if number is not None:
        if number not in paths:
            have = ", ".join(map(str, paths)) or "none"
            raise UsageError(f"usage error: run {run_id} has no verdict {number} (it has: {have})")
        paths = {number: paths[number]}
    ledger_notes: list[str] = []
    traces = _trace_rows(store.state_dir, ledger_notes) if paths else {}
    results = []
    for path in paths.values():
        verdict = read_verdict(path)
        result = replay_verdict(
            verdict, path, record, loaded.config, traces.get(verdict.decision_id, [])
        )
        if ledger_notes:
            result = replace(result, limitations=[*result.limitations, *ledger_notes])
        results.append(result)
    return results
