"""What the mutator will do, as data: the plan (``Dispatch``) an action states before it
acts, the facts a plan is made from, and what happens next (``Effect``).

Pure: nothing here runs or writes anything. Replay compares the same plans.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.domain.lifecycle import RunState

if TYPE_CHECKING:
    from orchestrator.domain.config import Config, StageConfig
    from orchestrator.domain.proposals import Proposal
    from orchestrator.domain.runs import Halt, RunRecord
    from orchestrator.domain.verdicts import Verdict
    from orchestrator.storage import Approval


@dataclass(frozen=True)
class Effect:
    """What the pipeline does next: continue from a stage, or stop in a terminal state."""

    outcome: str  # one line for the run record and the ledger
    paused: bool = False  # waiting for a person to approve or reject
    resume_at: str | None = None
    terminal: RunState | None = None
    halt: Halt | None = None
    # Wait this long before resuming (an infrastructure back-off): the caller waits —
    # the driver interruptibly, a queue by scheduling the task later — never the mutator.
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Dispatch:
    """What the substrate would do with a proposal — stated, never done."""

    action: str  # what would be carried out (a rejected proposal becomes abandon-human)
    approval: str  # "auto": carried out at once; "person": waits for approve/reject
    rerun: str | None = None  # the stage re-run; for mechanical-fix, resumed at when green
    fallback: str | None = None  # mechanical-fix: the stage a red recipe's retry re-runs
    engine: str | None = None  # escalate-model / switch-engine: the override
    model: str | None = None
    recipe: tuple[tuple[str, ...], ...] = ()  # the argv lists, as plan_recipe makes them
    recipe_errors: tuple[str, ...] = ()
    verify_check: str | None = None
    terminal: str | None = None  # the run state it ends in, for the terminal actions
    halt: str | None = None
    sub_tickets: tuple[str, ...] = ()
    error: str | None = None  # the substrate would refuse it (a StateError there)

    def as_dict(self) -> dict[str, Any]:
        """Its fields in order, as JSON has them (lists, not tuples)."""
        return {
            **asdict(self),
            "recipe": [list(argv) for argv in self.recipe],
            "recipe_errors": list(self.recipe_errors),
            "sub_tickets": list(self.sub_tickets),
        }

    def describe(self) -> str:
        if self.error is not None:
            return f"refused: {self.error}"
        if self.terminal is not None:
            what = (
                f"split into {len(self.sub_tickets)} sub-tickets"
                if self.terminal == RunState.SPLIT
                else f"{self.terminal} ({self.halt})"
            )
        elif self.action == "mechanical-fix":
            what = (
                f"recipe refused → re-run {self.fallback}"
                if self.recipe_errors
                else f"recipe of {len(self.recipe)} command(s), verified by {self.verify_check}: "
                f"green → resume at {self.rerun}, red → re-run {self.fallback}"
            )
        elif self.engine is not None:
            what = f"re-run {self.rerun} with {self.engine}/{self.model or '-'}"
        else:
            what = f"re-run {self.rerun}"
        return what if self.approval == "auto" else f"{what}, once a person approves"


@dataclass(frozen=True)
class PlanFacts:
    """Everything a plan may depend on: the trusted config, the run as it stood at the
    decision (its overrides give the engine and model an escalation starts from), and
    what the decision recorded about the failure — never anything the model wrote."""

    config: Config
    record: RunRecord
    approval: str  # "auto" or "person"
    failing: StageConfig
    code: StageConfig  # the stage whose output a re-run redoes
    failing_check: str | None
    halt_reason: str | None
    cap_exhausted: bool


@dataclass(frozen=True)
class DecisionToApply:
    """The decision being carried out: its proposal, its approval, its verdict (a
    rejected proposal's becomes abandon-human) and the failed stage. What to *do* is
    the plan."""

    proposal: Proposal
    approval: Approval
    verdict: Verdict
    failing_stage: StageConfig
    source: str
    reason: str
    bundle_path: str | None

    @property
    def number(self) -> int:
        return self.approval.verdict


def code_stage_for(config: Config, failing: StageConfig) -> StageConfig:
    """The stage whose output a retry must redo: a failed check re-runs the nearest
    engine stage before it; any other stage re-runs itself."""
    if not failing.is_check_stage:
        return failing
    names = [s.name for s in config.stages]
    for stage in reversed(config.stages[: names.index(failing.name)]):
        if stage.engine is not None:
            return stage
    return failing


def rerun_stage_for(config: Config, failing: StageConfig, *, infra: str | None) -> StageConfig:
    """The stage a re-run redoes: ``code_stage_for``, except after an infrastructure
    failure (the network, a rate limit, an outage named by a check): then the failing
    stage itself. The code was never judged, and re-running the engine would spend money
    and may change code that was right."""
    return failing if infra is not None else code_stage_for(config, failing)
