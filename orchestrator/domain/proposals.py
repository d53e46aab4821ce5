"""The typed decision as it leaves the recovery graph: what the decision saw
(``RecoveryContext``, and the small records it is made of: the ``Failure``, the
``PromptFacts``, the ``Caps``, each action's ``History``) and what it proposes
(``Proposal``, with its ``Evidence``).

All frozen pydantic models: they serialise themselves into the verdict file and back, and
the substrate reads ``proposal.action`` (a ``Verdict``) and ``proposal.evidence.failure``
as typed fields — never by string key. Only the records live here; the recovery graph
(``orchestrator/recovery/``) makes them: the playbook reads a ``Failure``, the prompt is
built from the ``PromptFacts``, confidence is composed from the ``History`` and routed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.playbook import PlaybookMatch
from orchestrator.domain.validation import Frozen
from orchestrator.domain.verdicts import DecisionContext, Verdict

__all__ = [
    "CONFIDENCE_RULES",
    "BundleEvidence",
    "Caps",
    "Evidence",
    "Failure",
    "FailureEvidence",
    "GuardrailEvidence",
    "HaltEvidence",
    "History",
    "JudgeEvidence",
    "PromptFacts",
    "Proposal",
    "RecoveryContext",
    "Routing",
    "Source",
    "SourceEvidence",
    "UsageEvidence",
    "facts_for",
]

Routing = Literal["auto", "hitl_recommended", "hitl_required", "reject"]

# Which rules a decision was composed and routed under, recorded with its inputs so a
# replay of an older decision applies the rules it was made under. 1: history fed every
# source (undecayed counts) and an infrastructure verdict was routed by its score.
# (The rules themselves: ``orchestrator/recovery/confidence.py``.)
CONFIDENCE_RULES = 2


class Source(StrEnum):
    MODEL = "model"
    PLAYBOOK = "playbook"
    SYNTHETIC = "synthetic"
    INFRA = "infra"  # a deterministic answer to an infrastructure failure


class History(Frozen):
    """What the ledger remembers about this failure signature and action: weighted counts
    (each outcome weighs 1 when fresh, less as it ages). Older verdict files hold whole
    numbers here, which read as the same weights."""

    green: float = 0.0
    total: float = 0.0

    @property
    def score(self) -> float:
        return (self.green + 1) / (self.total + 2)


class Caps(Frozen):
    diagnoses_used: int
    max_diagnoses: int
    infra_retries_used: int = 0
    max_infra_retries: int = 3

    @property
    def spent(self) -> bool:
        return self.diagnoses_used >= self.max_diagnoses


class Failure(Frozen):
    """What the playbook may look at: the failing check and what it printed."""

    check: str | None
    output: str
    ticket_title: str
    # An infrastructure class (rate_limited, outage, auth_error, ...), when the failed
    # attempt was classified as one: such failures never reach the model.
    infra: str | None = None
    infra_detail: str | None = None
    # The failed program's own telling line (redacted), so that a decision taken without
    # looking further names the first cause rather than a later symptom.
    stage_said: str | None = None
    # The lines around the check's lowest root-cause line (redacted), when its log is longer
    # than ``output``: a megabyte printed after the failure must not hide a known one.
    output_further_up: str | None = None


class PromptFacts(Frozen):
    ticket_id: str
    ticket_kind: str
    failing_stage: str
    failing_check: str | None
    current_engine: str | None
    current_model: str | None
    engines: dict[str, list[str]]
    recipe_allowlist: list[str]


def facts_for(ctx: DecisionContext, ticket_id: str, ticket_kind: str) -> PromptFacts:
    """What the prompt says about the failure: the decision context, as the model sees it."""
    return PromptFacts(
        ticket_id=ticket_id,
        ticket_kind=ticket_kind,
        failing_stage=ctx.failing_stage,
        failing_check=ctx.failing_check,
        current_engine=ctx.current_engine,
        current_model=ctx.current_model,
        engines={k: list(v) for k, v in ctx.ladders.items()},
        recipe_allowlist=list(ctx.recipe_allowlist),
    )


class RecoveryContext(Frozen):
    """Everything the decision may look at, gathered before the graph runs. Persisted in
    the verdict file (as ``inputs``) without ``bundle_text``, which the bundle file holds."""

    decision_id: str
    ticket_id: str
    run_id: str
    attempt: int
    signature: str  # failure signature, for history in the ledger
    decision: DecisionContext
    failure: Failure
    facts: PromptFacts
    bundle_text: str = Field(default="", exclude=True)
    bundle_path: str | None
    inputs_hash: str
    clone_exists: bool
    caps: Caps
    history: Mapping[str, History] = Field(default_factory=dict)  # action → outcomes
    identity: Mapping[str, str] = Field(default_factory=dict)
    # The confidence and routing rules the decision is made under (see ``confidence``);
    # inputs read from a verdict file that does not say were made under the first.
    confidence_rules: int = CONFIDENCE_RULES
    # The failure's deciding lines, masked (issue 44): what a playbook entry learned from
    # this decision would match. None in files written before there was one.
    failure_signature: FailureSignature | None = None
    # The promoted playbook entry that matched, resolved before the graph ran, so that
    # replay decides the same without the playbook's files. None: no entry matched.
    known: PlaybookMatch | None = None


class SourceEvidence(Frozen):
    source: Source
    valid: bool
    playbook_entry: str | None = None
    model: str | None = None


class FailureEvidence(Frozen):
    stage: str
    check: str | None = None
    attempt: int
    signature: str
    infra: str | None = None


class HaltEvidence(Frozen):
    reason: HaltReason | None = None
    cap_exhausted: bool = False


class BundleEvidence(Frozen):
    path: str | None = None
    inputs_hash: str


class GuardrailEvidence(Frozen):
    redactions: int = 0
    blocked: tuple[str, ...] = ()


class UsageEvidence(Frozen):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class JudgeEvidence(Frozen):
    sampled: bool = False
    agrees: bool | None = None
    reason: str = ""
    # Why no judge call was made although the decision was eligible: no judge is
    # configured, or the judge's factory refused (``reason`` says why). Replay gives the
    # judge the same availability.
    unavailable: bool = False


class Evidence(Frozen):
    """What the proposal rests on, one typed field per kind."""

    source: SourceEvidence
    failure: FailureEvidence
    halt: HaltEvidence = HaltEvidence()
    bundle: BundleEvidence
    verification: Mapping[str, bool] = Field(default_factory=dict)  # check → passed
    signals: Mapping[str, float] = Field(default_factory=dict)
    guardrail: GuardrailEvidence = GuardrailEvidence()
    validation: tuple[str, ...] = ()  # the validation errors
    usage: UsageEvidence = UsageEvidence()
    judge: JudgeEvidence = JudgeEvidence()

    @model_validator(mode="before")
    @classmethod
    def _from_tagged_list(cls, data: Any) -> Any:
        """Verdict files written before evidence was typed hold a list of tagged dicts
        (``[{"kind": "failure", "stage": ...}, ...]``): read them into the typed fields."""
        if not isinstance(data, list):
            return data
        out: dict[str, Any] = {}
        for entry in data:
            if not isinstance(entry, dict):
                raise ValueError("evidence: every entry must be an object")
            fields = {k: v for k, v in entry.items() if k != "kind"}
            kind = entry.get("kind")
            if kind == "verification":
                out["verification"] = fields.get("checks", {})
            elif kind == "signals":
                out["signals"] = fields
            elif kind == "validation":
                out["validation"] = fields.get("errors", [])
            elif kind == "judge":
                out["judge"] = {
                    k: fields[k] for k in ("sampled", "agrees", "reason") if k in fields
                }
            elif isinstance(kind, str):
                out[kind] = fields
        return out


class Proposal(Frozen):
    """What the agent proposes. Not yet applied: the substrate applies it, after approval."""

    decision_id: str
    capability: str
    action: Verdict
    confidence: float
    routing: Routing
    reasoning: tuple[str, ...]
    evidence: Evidence
