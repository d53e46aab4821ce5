"""Replay a past decision: re-run the recovery graph on the persisted inputs, re-feeding
its call transcript, and compare today's proposal and dispatch with the persisted ones.

    verdict file ─► RecoveryContext (``inputs``, with the bundle file's text)
                 ─► run_graph with replay deps: a ``TranscriptPlayer`` answers every model
                    call (diagnosis, re-asks, investigation steps, judge) and every
                    investigation tool call from the recorded transcript, in order, with
                    the reply texts stored beside the verdict (its factories charge nothing);
                    thresholds, re-asks and sampling are today's
                 ─► the transcript's divergences (a request whose digest differs, a call
                    the transcript does not have, a recorded call never made, a stored
                    reply that no longer matches its digest), then a field-by-field
                    comparison of the two proposals and of what the substrate would do
                    with each (``plan_dispatch``)

Nothing is inferred from the words of a reason: what happened is the transcript.

Pure apart from reading files: no model is reached (there is no real gateway here), no
process starts and nothing is written — replay is given no runner, no services and no
substrate ``apply``; it only *states* what the substrate would do.

Verdict files written before the transcript existed are replayed when they made no model
call (there is nothing to re-feed); otherwise they are reported as not replayable, with a
note saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from orchestrator.app.investigation_tools import clone_tools
from orchestrator.app.substrate import Dispatch, plan_dispatch
from orchestrator.domain.config import Config, LoadedConfig
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.proposals import Proposal, RecoveryContext, Source
from orchestrator.domain.runs import RunRecord, StageOverride
from orchestrator.domain.transcripts import CallPurpose, ModelCall, ToolCall
from orchestrator.recovery.context import ContextBundle
from orchestrator.recovery.diagnose import Decision
from orchestrator.recovery.gateway import ModelGateway, Unavailable
from orchestrator.recovery.graph import run_graph
from orchestrator.recovery.graph_state import GraphDeps, GraphState
from orchestrator.recovery.investigate import Tool, investigator
from orchestrator.recovery.playbook import builtin_playbook
from orchestrator.recovery.prompt import PROMPT_VERSION, PROMPTS
from orchestrator.recovery.transcript import TranscriptPlayer
from orchestrator.storage import VerdictRecord
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.layout import verdict_files
from orchestrator.storage.ledger import inputs_hash
from orchestrator.storage.runs import RunStore
from orchestrator.storage.transcripts import read_texts, replies_dir

__all__ = [
    "Difference",
    "Dispatch",
    "ReplayResult",
    "compare",
    "plan_dispatch",
    "replay",
    "replay_verdict",
    "verdict_paths",
]

ABSENT: Final = "<absent>"
REPLAY_MODEL: Final = "replay"


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


# ---- availability and tools -------------------------------------------------------------


def model_availability(
    verdict: VerdictRecord, player: TranscriptPlayer
) -> ModelGateway | Unavailable | None:
    """What the gateway factory gave the graph then: no gateway (no model configured), a
    refusal (a spent batch budget, with its reason), or a gateway (here: the player).
    Availability is the environment's state, not the decision's: replay reproduces it
    from the typed halt reason."""
    if verdict.usage.calls == 0 and verdict.source == Source.SYNTHETIC:
        if verdict.halt in (HaltReason.NO_MODEL, HaltReason.AUTH_ERROR):
            # No key, or one the model refused before any call: the words were the
            # factory's ("no model configured" in files from before it named the key).
            return Unavailable(verdict.reason, halt=HaltReason(verdict.halt))
        if verdict.halt == HaltReason.BUDGET_SPENT:
            return Unavailable(verdict.reason)
    return player


def judge_availability(
    proposal: Proposal, player: TranscriptPlayer
) -> ModelGateway | Unavailable | None:
    """The judge shares the transcript; where it was unavailable then, it is now, for the
    persisted reason."""
    judge = proposal.evidence.judge
    return Unavailable(judge.reason) if judge.unavailable else player


def _recorded_tools(player: TranscriptPlayer) -> dict[str, Tool]:
    """The real tools' names (building them reads and runs nothing), each answering with
    the recorded result of the next tool call."""

    def recorded(name: str) -> Tool:
        def tool(args: Mapping[str, Any]) -> str:
            return player.tool(name, args)

        return tool

    return {name: recorded(name) for name in clone_tools(Path("/nonexistent"), {})}


def _replay_investigator(
    config: Config, player: TranscriptPlayer
) -> Callable[[GraphState, GraphDeps], Decision]:
    return investigator(
        tools=_recorded_tools(player),
        allow=frozenset(config.diagnosis.tools),
        max_steps=config.diagnosis.max_steps,
        max_tokens=config.model.max_tokens,
    )


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


def proposal_fields(proposal: Proposal) -> dict[str, Any]:
    """A proposal as named fields: ``action``, ``verdict.<field>``, ``routing``,
    ``confidence``, ``reasoning[i]``, ``evidence.<kind>.<key>``."""
    data = proposal.model_dump(mode="json")
    out: dict[str, Any] = {
        "decision_id": data["decision_id"],
        "capability": data["capability"],
    }
    action = dict(data["action"])
    out["action"] = action.pop("action")
    _flatten(action, "verdict", out)
    out["routing"] = data["routing"]
    out["confidence"] = data["confidence"]
    for index, line in enumerate(data["reasoning"]):
        out[f"reasoning[{index}]"] = line
    _flatten(data["evidence"], "evidence", out)
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


def _limitations(verdict: VerdictRecord, calls: tuple[ModelCall | ToolCall, ...]) -> list[str]:
    notes = []
    model_calls = [c for c in calls if isinstance(c, ModelCall)]
    if model_calls and verdict.prompt_version not in PROMPTS:
        # Known versions are rebuilt word for word (``prompt_version_of``); this one is not.
        notes.append(
            f"the prompt changed since ({verdict.prompt_version} → {PROMPT_VERSION}): the "
            "recorded replies answered the old prompt"
        )
    for index, call in enumerate(calls):
        if isinstance(call, ModelCall) and call.redactions:
            notes.append(
                f"call {index} ({call.purpose}): its reply was stored after scrubbing "
                f"({call.redactions} replacement(s)); replay reads the scrubbed text"
            )
    return notes


def _transcript(verdict: VerdictRecord) -> tuple[ModelCall | ToolCall, ...] | None:
    """The calls to re-feed; None when the file predates transcripts and made calls."""
    if verdict.transcript is not None:
        return verdict.transcript
    # Older files made no call when they say so: there is nothing to re-feed.
    return () if verdict.usage.calls == 0 else None


def prompt_version_of(verdict: VerdictRecord) -> str:
    """The prompt a replay rebuilds: the one the decision was made with when this code
    still knows its words, else today's (and the replay says so)."""
    return verdict.prompt_version if verdict.prompt_version in PROMPTS else PROMPT_VERSION


def replay_verdict(
    verdict: VerdictRecord,
    record: RunRecord,
    config: Config,
    texts: Mapping[str, str],
) -> ReplayResult:
    """Re-run the graph for one persisted decision, re-feeding its transcript (``texts``:
    the stored reply texts by digest), and compare."""
    if verdict.inputs is None:
        return _not_replayable(
            verdict,
            "written before verdict files recorded their inputs: cannot be replayed",
        )
    calls = _transcript(verdict)
    if calls is None:
        return _not_replayable(
            verdict,
            f"written before verdict files carried a call transcript: its "
            f"{verdict.usage.calls} model call(s) cannot be replayed exactly",
        )
    limitations = _limitations(verdict, calls)
    bundle_text, bundle_hash = _bundle_text(verdict, limitations)
    ctx = verdict.inputs.model_copy(update={"bundle_text": bundle_text})
    if ctx.known is None and verdict.source == "playbook" and verdict.playbook_entry:
        # Decided before the matched entry was kept in the inputs (issue 44): only the
        # built-in entries decided then, and they are matched again as they were.
        ctx = ctx.model_copy(update={"known": builtin_playbook().match(ctx.failure, None)})
    then = verdict.proposal

    player = TranscriptPlayer(calls, texts, model_name=verdict.model or REPLAY_MODEL)
    model = model_availability(verdict, player)
    judge = judge_availability(then, player)

    def gateway_factory() -> ModelGateway | Unavailable | None:
        return model

    def judge_factory() -> ModelGateway | Unavailable | None:
        return judge

    deps = replace(
        GraphDeps.from_config(
            config,
            gateway_factory=gateway_factory,
            judge_factory=judge_factory,
            investigate=(
                _replay_investigator(config, player)
                if config.diagnosis.mode == "investigate"
                else None
            ),
        ),
        prompt_version=prompt_version_of(verdict),
    )
    state = run_graph(ctx, deps)
    now = state.require_proposal()

    differences = []
    if bundle_hash is not None and bundle_hash != ctx.inputs_hash:
        differences.append(Difference("bundle.inputs_hash", ctx.inputs_hash, bundle_hash))
    divergences = player.finish()
    differences += [Difference(d.name, d.then, d.now) for d in divergences]
    differences += compare(proposal_fields(then), proposal_fields(now))
    at_decision = record_at_decision(record, ctx)
    dispatch_then = plan_dispatch(then, config, at_decision)
    dispatch_now = plan_dispatch(now, config, at_decision)
    differences += compare(
        _dispatch_fields(dispatch_then), _dispatch_fields(dispatch_now), prefix="dispatch."
    )
    made = sum(1 for c in state.transcript.entries if isinstance(c, ModelCall))
    unanswered = sum(1 for d in divergences if d.what == "missing" and d.now in set(CallPurpose))
    return ReplayResult(
        number=verdict.number,
        decision_id=verdict.decision_id,
        identical=not differences,
        differences=differences,
        limitations=limitations,
        calls_replayed=made - unanswered,
        action=now.action.action,
        routing=now.routing,
        dispatch=dispatch_now,
    )


def _not_replayable(verdict: VerdictRecord, why: str) -> ReplayResult:
    return ReplayResult(
        number=verdict.number,
        decision_id=verdict.decision_id,
        identical=False,
        differences=[],
        limitations=[why],
        calls_replayed=0,
        action=verdict.action,
        routing=verdict.proposal.routing,
        replayable=False,
    )


# ---- a run ------------------------------------------------------------------------------


def verdict_paths(store: RunStore, run_id: str) -> dict[int, Path]:
    """``runs/<run-id>.verdict-<n>.json`` by number: the files, not the run record's refs,
    so a decision persisted just before a crash is replayed too."""
    return {v.number: v.path for v in verdict_files(store.runs_dir, run_id=run_id)}


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
    texts_dir = replies_dir(store.runs_dir, run_id)
    results = []
    for path in paths.values():
        verdict = read_verdict(path)
        digests = [
            digest
            for call in verdict.transcript or ()
            for digest in (
                (call.reply_sha256,) if isinstance(call, ModelCall) else (call.result_sha256,)
            )
            if digest is not None
        ]
        texts = read_texts(texts_dir, digests)
        results.append(replay_verdict(verdict, record, loaded.config, texts))
    return results
