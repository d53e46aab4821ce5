"""The typed decision as it leaves the recovery graph: what the decision saw
(``RecoveryContext``) and what it proposes (``Proposal``, with its ``Evidence``).

All frozen pydantic models: they serialise themselves into the verdict file and back, and
the substrate reads ``proposal.action`` (a ``Verdict``) and ``proposal.evidence.failure``
as typed fields — never by string key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.validation import Frozen
from orchestrator.recovery.confidence import CONFIDENCE_RULES, History, Routing
from orchestrator.recovery.diagnose import Caps, Source
from orchestrator.recovery.playbook import Failure
from orchestrator.recovery.prompt import PromptFacts
from orchestrator.domain.verdicts import DecisionContext, Verdict

__all__ = [
    "BundleEvidence",
    "Evidence",
    "FailureEvidence",
    "GuardrailEvidence",
    "HaltEvidence",
    "JudgeEvidence",
    "Proposal",
    "RecoveryContext",
    "SourceEvidence",
    "UsageEvidence",
]


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
