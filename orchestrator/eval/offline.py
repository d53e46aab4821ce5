"""The offline evaluation: every case through the deterministic layers, no model.

Per case: the class the attempt would get, the failure's signature (issue 44), the
precheck's decision (infra verdict, playbook entry, or "ask the model") with the playbook
given (the built-in entries unless a pass of ``eval.learning`` gives its own), whether the
labelled root-cause line reaches the bundle the model would be shown, and that bundle's
size. The summary turns those into the
numbers ``orchestrator eval`` reports. Pure apart from reading the corpus files.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from pydantic import Field

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.proposals import Caps, Failure
from orchestrator.domain.validation import Frozen
from orchestrator.eval import layers
from orchestrator.eval.corpus import LOG_FILE, Case, CaseLabel
from orchestrator.eval.padding import PAD_BYTES, PAD_SEED, pad_log
from orchestrator.recovery.context import build_bundle
from orchestrator.recovery.diagnose import Decision, precheck
from orchestrator.recovery.playbook import Playbook, builtin_playbook

# A fresh ticket: nothing spent yet, the starter config's caps.
FRESH_CAPS = Caps(diagnoses_used=0, max_diagnoses=2, infra_retries_used=0, max_infra_retries=3)
BYTES_PER_TOKEN = 4


class CaseResult(Frozen):
    id: str
    padded: bool
    family: str | None = None
    label_class: str
    observed_class: str
    model_call_warranted: bool
    model_call_made: bool
    # Who decided without the model ("infra", "playbook", "synthetic"), or "model".
    decided_by: str
    action: str | None  # the deterministic verdict's action; None when the model is asked
    action_acceptable: bool | None
    expected_playbook_entry: str | None
    playbook_entry: str | None
    # The label's (primary) root-cause line, and whether it reached the bundle.
    root_cause: str = ""
    root_cause_in_bundle: bool
    # Any of the label's root-cause lines (the primary one or a further one) in the bundle.
    any_root_cause_in_bundle: bool = False
    bundle_bytes: Annotated[int, Field(ge=0)]
    # Where it failed (the decision context's stage and check) and its signature (its
    # deciding lines, masked) and key: what a playbook entry learned from it matches.
    stage: str = ""
    check: str | None = None
    signature: tuple[str, ...] = ()
    signature_key: str | None = None
    # The rendered bundle, kept for the live evaluation (never persisted in a report).
    bundle_text: str = Field(default="", exclude=True, repr=False)
    # The failure the precheck was given, kept so a later pass of ``eval.learning``
    # decides it again with its own playbook without reading the log again.
    failure: Failure | None = Field(default=None, exclude=True, repr=False)

    @property
    def failure_signature(self) -> FailureSignature:
        return FailureSignature(
            stage=self.stage, check=self.check, failure_class=self.observed_class,
            lines=self.signature,
        )  # fmt: skip

    @property
    def class_correct(self) -> bool:
        return self.observed_class == self.label_class

    @property
    def bundle_tokens(self) -> int:
        return self.bundle_bytes // BYTES_PER_TOKEN


def decide(
    label: CaseLabel, failure: Failure, signature: FailureSignature, playbook: Playbook
) -> Decision | None:
    """The precheck's decision, as ``app.recover`` makes it: the promoted entry
    of ``playbook`` that matches the failure's signature (or a pattern entry its output),
    then the precheck on a fresh ticket. None: the model would be asked."""
    ctx = layers.decision_context(label)
    known = playbook.match(failure, signature, stage=ctx.failing_stage)
    return precheck(ctx=ctx, failure=failure, clone_exists=True, caps=FRESH_CAPS, known=known)


def _decided(label: CaseLabel, decision: Decision | None) -> dict[str, object]:
    action = decision.verdict.action if decision is not None else None
    return {
        "model_call_made": decision is None,
        "decided_by": decision.source.value if decision is not None else "model",
        "action": action,
        "action_acceptable": None if action is None else action in label.acceptable_actions,
        "playbook_entry": decision.playbook_entry if decision is not None else None,
    }


def evaluate_case(
    case: Case, corpus_dir: Path, limits: ContextLimits, playbook: Playbook | None = None
) -> CaseResult:
    label = case.label
    observed, detail = layers.reading(case)
    failure = layers.failure_of(case, observed, limits, detail)
    signature = layers.signature_of(case, observed, detail, limits)
    decision = decide(
        label, failure, signature, builtin_playbook() if playbook is None else playbook
    )
    bundle = build_bundle(layers.bundle_inputs(case, corpus_dir), limits)
    rendered = bundle.render()
    root_causes = (label.root_cause, *label.root_cause_also)
    return CaseResult(
        id=label.id,
        padded=label.padded,
        family=label.family,
        label_class=label.failure_class,
        observed_class=observed,
        model_call_warranted=label.model_call_warranted,
        expected_playbook_entry=label.playbook_entry,
        root_cause=label.root_cause,
        root_cause_in_bundle=label.root_cause in rendered,
        any_root_cause_in_bundle=any(line in rendered for line in root_causes),
        bundle_bytes=len(rendered.encode("utf-8")),
        stage=signature.stage,
        check=signature.check,
        signature=signature.lines,
        signature_key=None if signature.empty else signature.key,
        bundle_text=rendered,
        failure=failure,
        **_decided(label, decision),  # type: ignore[arg-type]
    )


def redecided(result: CaseResult, label: CaseLabel, playbook: Playbook) -> CaseResult:
    """``result`` decided again with ``playbook`` (a later pass of ``eval.learning``): the
    same failure and signature through the same ``decide``; its class, bundle and root
    cause are the log's and do not change."""
    if result.failure is None:
        raise ValueError(f"{result.id}: no failure kept to decide again")
    decision = decide(label, result.failure, result.failure_signature, playbook)
    return result.model_copy(update=_decided(label, decision))


def percentile(values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil without floats drifting
    return ordered[int(rank) - 1]


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


class Summary(Frozen):
    cases: int
    padded_cases: int
    classifier_accuracy: float | None
    classifier_misses: tuple[str, ...]
    playbook_cases: int
    playbook_accuracy: float | None
    playbook_misses: tuple[str, ...]
    deterministic_decisions: int
    deterministic_action_accuracy: float | None
    deterministic_action_misses: tuple[str, ...]
    model_calls_warranted: int
    model_calls_made: int
    model_calls_avoided: int
    # Calls made although the label says none was warranted (infra, resources, playbook).
    unwarranted_model_calls: tuple[str, ...]
    root_cause_recall: float | None
    root_cause_recall_padded: float | None
    root_cause_misses: tuple[str, ...]
    bundle_tokens_p50: int
    bundle_tokens_p95: int
    bundle_tokens_max: int


def summarise(results: Sequence[CaseResult]) -> Summary:
    if not results:
        raise ValueError("nothing to summarise: no cases")
    playbook = [r for r in results if r.expected_playbook_entry or r.playbook_entry]
    decided = [r for r in results if not r.model_call_made]
    padded = [r for r in results if r.padded]
    tokens = [r.bundle_tokens for r in results]
    return Summary(
        cases=len(results),
        padded_cases=len(padded),
        classifier_accuracy=_ratio(sum(r.class_correct for r in results), len(results)),
        classifier_misses=tuple(
            f"{r.id}: {r.observed_class} (label {r.label_class})"
            for r in results
            if not r.class_correct
        ),
        playbook_cases=len(playbook),
        playbook_accuracy=_ratio(
            sum(r.playbook_entry == r.expected_playbook_entry for r in playbook), len(playbook)
        ),
        playbook_misses=tuple(
            f"{r.id}: {r.playbook_entry} (label {r.expected_playbook_entry})"
            for r in playbook
            if r.playbook_entry != r.expected_playbook_entry
        ),
        deterministic_decisions=len(decided),
        deterministic_action_accuracy=_ratio(
            sum(bool(r.action_acceptable) for r in decided), len(decided)
        ),
        deterministic_action_misses=tuple(
            f"{r.id}: {r.action}" for r in decided if not r.action_acceptable
        ),
        model_calls_warranted=sum(r.model_call_warranted for r in results),
        model_calls_made=sum(r.model_call_made for r in results),
        model_calls_avoided=len(decided),
        unwarranted_model_calls=tuple(
            r.id for r in results if r.model_call_made and not r.model_call_warranted
        ),
        root_cause_recall=_ratio(sum(r.root_cause_in_bundle for r in results), len(results)),
        root_cause_recall_padded=_ratio(sum(r.root_cause_in_bundle for r in padded), len(padded)),
        root_cause_misses=tuple(r.id for r in results if not r.root_cause_in_bundle),
        bundle_tokens_p50=percentile(tokens, 50),
        bundle_tokens_p95=percentile(tokens, 95),
        bundle_tokens_max=max(tokens),
    )


def evaluate(
    cases: Sequence[Case], corpus_dir: Path, limits: ContextLimits,
    playbook: Playbook | None = None,
) -> tuple[tuple[CaseResult, ...], Summary]:  # fmt: skip
    playbook = builtin_playbook() if playbook is None else playbook
    results = tuple(evaluate_case(case, corpus_dir, limits, playbook) for case in cases)
    return results, summarise(results)


def evaluate_padded(
    cases: Sequence[Case], corpus_dir: Path, limits: ContextLimits, *,
    pad_bytes: int = PAD_BYTES, seed: int = PAD_SEED, playbook: Playbook | None = None,
) -> tuple[CaseResult, ...]:  # fmt: skip
    """Every case again, its log buried in ``pad_bytes`` of ordinary build output before
    and after (``eval.padding``). Each padded log is written to a temporary directory
    outside the corpus, evaluated and removed before the next is written."""
    results = []
    playbook = builtin_playbook() if playbook is None else playbook
    with tempfile.TemporaryDirectory(prefix="orchestrator-eval-pad-") as scratch:
        for case in cases:
            padded_log = Path(scratch) / case.label.id / LOG_FILE
            padded_log.parent.mkdir()
            padded_log.write_bytes(
                pad_log(case.log_path.read_bytes(), size=pad_bytes, seed=seed, salt=case.label.id)
            )
            padded = Case(case.label.model_copy(update={"padded": True}), padded_log)
            results.append(evaluate_case(padded, corpus_dir, limits, playbook))
            padded_log.unlink()
    return tuple(results)
