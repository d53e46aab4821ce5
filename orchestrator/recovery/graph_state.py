"""What the recovery graph carries from node to node: one typed state (``GraphState``),
the services the nodes may use (``GraphDeps``), and what the guardrail, verification and
judge found on the way. Values only: the nodes are ``graph.py``'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from orchestrator.domain.config import Config
from orchestrator.domain.decisions import AuditMemory, LedgerEntry
from orchestrator.domain.proposals import (
    Proposal,
    RecoveryContext,
    Routing,
)
from orchestrator.recovery.diagnose import Decision, Usage
from orchestrator.recovery.gateway import GatewayFactory, ModelGateway
from orchestrator.recovery.prompt import PROMPT_VERSION
from orchestrator.recovery.transcript import Transcript


@dataclass(frozen=True)
class Verification:
    checks: Mapping[str, bool]
    score: float
    verified: bool  # all(checks): derived here, never a field anyone sets


@dataclass(frozen=True)
class Guardrail:
    redactions: int = 0
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgeResult:
    sampled: bool
    agrees: bool | None = None
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    unavailable: bool = False  # eligible, but no judge was configured or it was refused
    transcript: Transcript = field(default_factory=Transcript)


@dataclass(frozen=True)
class GraphState:
    ctx: RecoveryContext
    identity: Mapping[str, str] = field(default_factory=dict)
    early: Decision | None = None
    context_text: str = ""
    decision: Decision | None = None
    guardrail: Guardrail = field(default_factory=Guardrail)
    verification: Verification | None = None
    judge: JudgeResult | None = None
    confidence: float | None = None
    signals: Mapping[str, float] = field(default_factory=dict)
    routing: Routing | None = None
    proposal: Proposal | None = None
    memory: AuditMemory | None = None
    ledger_entries: tuple[LedgerEntry, ...] = ()
    trace: tuple[str, ...] = ()

    def require_decision(self) -> Decision:
        if self.decision is None:
            raise AssertionError("llm_decision has not run")
        return self.decision

    def require_proposal(self) -> Proposal:
        if self.proposal is None:
            raise AssertionError("prepare_proposal has not run")
        return self.proposal

    def require_memory(self) -> AuditMemory:
        if self.memory is None:
            raise AssertionError("memory_write has not run")
        return self.memory

    @property
    def transcript(self) -> Transcript:
        """Every call the decision made, in order: the diagnosis (or investigation), then
        the judge."""
        made = self.decision.transcript if self.decision else Transcript()
        return made.plus(self.judge.transcript) if self.judge else made


def _no_judge() -> ModelGateway | None:
    return None


@dataclass(frozen=True)
class GraphDeps:
    """The services the graph may use (injected; tests script them)."""

    gateway_factory: GatewayFactory
    thresholds: Mapping[str, float]
    max_reasks: int = 1
    max_tokens: int = 2048
    judge_sample_rate: float = 0.0
    judge_factory: GatewayFactory = _no_judge
    # The bounded investigation loop replaces the single call when configured.
    investigate: Callable[[GraphState, GraphDeps], Decision] | None = None
    # The prompt's words: today's, or (replay) the version an older decision was made with.
    prompt_version: str = PROMPT_VERSION

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        gateway_factory: GatewayFactory,
        judge_factory: GatewayFactory,
        investigate: Callable[[GraphState, GraphDeps], Decision] | None,
    ) -> GraphDeps:
        """The graph's rails as the config sets them: one place, so a replay decides with
        exactly the thresholds, re-asks and sampling a live decision uses."""
        return cls(
            gateway_factory=gateway_factory,
            thresholds=config.routing.by_action(),
            max_reasks=config.recovery.max_reasks,
            max_tokens=config.model.max_tokens,
            judge_sample_rate=config.judge.sample_rate,
            judge_factory=judge_factory,
            investigate=investigate,
        )


class Node(Protocol):
    name: str

    def run(self, state: GraphState, deps: GraphDeps) -> GraphState: ...
