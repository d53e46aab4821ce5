"""The verdict actions, collected: the one list of what a decision may do.

Everything that names the actions derives from here — the CLI's ``verdicts --action``
choices, the ``[routing]`` keys and their defaults, the prompt's vocabulary, and the
verification rules a verdict is checked against. An action added here (``register``)
reaches all of them.

``plan_dispatch`` states what the substrate will do with a proposal; the substrate
carries out exactly that plan, and replay compares it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from orchestrator.actions import abandon, mechanical_fix, rerun, split
from orchestrator.actions.plan import Dispatch, PlanFacts, rerun_stage_for
from orchestrator.actions.proposal import failure_of, halt_of, verdict_of
from orchestrator.actions.spec import ActionSpec
from orchestrator.recovery.verdict import (
    AbandonHumanVerdict,
    DecisionContext,
    Verdict,
)
from orchestrator.recovery.verdict import (
    abandon as abandon_verdict,
)

if TYPE_CHECKING:
    from orchestrator.domain.config import Config
    from orchestrator.recovery.proposal import Proposal
    from orchestrator.storage.runs import RunRecord


class ActionRegistry:
    """Actions by name, in the order the prompt and the CLI list them."""

    def __init__(self, specs: Iterable[ActionSpec[Any]]) -> None:
        self._specs: dict[str, ActionSpec[Any]] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ActionSpec[Any]) -> None:
        if spec.name in self._specs:
            raise ValueError(f"action {spec.name!r} is already registered")
        if not 0.0 <= spec.routing_default <= 1.0:
            raise ValueError(f"action {spec.name!r}: routing default must be within [0, 1]")
        self._specs[spec.name] = spec

    def unregister(self, name: str) -> None:
        del self._specs[name]

    @contextmanager
    def registered(self, spec: ActionSpec[Any]) -> Iterator[ActionSpec[Any]]:
        """``spec`` registered for the duration of the block (an extension, a test)."""
        self.register(spec)
        try:
            yield spec
        finally:
            self.unregister(spec.name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def get(self, name: str) -> ActionSpec[Any]:
        try:
            return self._specs[name]
        except KeyError:
            raise KeyError(f"{name!r} is not one of: {', '.join(self._specs)}") from None

    def for_verdict(self, verdict: object) -> ActionSpec[Any]:
        return self.get(str(getattr(verdict, "action", "")))

    def specs(self) -> tuple[ActionSpec[Any], ...]:
        return tuple(self._specs.values())

    def routing_defaults(self) -> dict[str, float]:
        return {name: spec.routing_default for name, spec in self._specs.items()}

    def vocabulary(self) -> tuple[tuple[str, str], ...]:
        """(name, what the prompt says about it), in order."""
        return tuple((name, spec.prompt) for name, spec in self._specs.items())


REGISTRY = ActionRegistry(
    (*rerun.SPECS, split.SPEC, abandon.SPEC, mechanical_fix.SPEC),
)


def rule_checks(verdict: Verdict, ctx: DecisionContext) -> dict[str, bool]:
    """The verdict's action's named business-rule checks (for verification)."""
    spec = REGISTRY.for_verdict(verdict)
    return spec.checks(verdict, ctx)


def rule_errors(verdict: Verdict, ctx: DecisionContext) -> list[str]:
    """The verdict's action's business rules, broken: empty means it may be executed."""
    spec = REGISTRY.for_verdict(verdict)
    return spec.errors(verdict, ctx)


def plan_dispatch(proposal: Proposal, config: Config, record: RunRecord) -> Dispatch:
    """What ``apply`` does with ``proposal`` once approved, stated as data and doing none
    of it: the substrate carries out exactly this plan, and replay compares it. Derived
    from the proposal's evidence and the trusted config only. ``record`` is the run as
    it stood at the decision. The retry budget is the ticket's spend state, not part of
    the decision, and is not considered."""
    approval = "auto" if proposal.routing in ("auto", "reject") else "person"
    verdict = verdict_of(proposal)
    failure, halt = failure_of(proposal), halt_of(proposal)
    try:
        failing = config.stage(failure.stage)
    except KeyError:
        return Dispatch(
            verdict.action, approval, error=f"stage {failure.stage!r} is not in today's config"
        )
    if proposal.routing == "reject" and not isinstance(verdict, AbandonHumanVerdict):
        verdict = abandon_verdict("proposal rejected")  # as the substrate does: never run
    facts = PlanFacts(
        config=config,
        record=record,
        approval=approval,
        failing=failing,
        code=rerun_stage_for(config, failing, infra=failure.infra),
        failing_check=failure.check,
        halt_reason=halt.reason.value if halt.reason is not None else None,
        cap_exhausted=halt.cap_exhausted,
    )
    return REGISTRY.for_verdict(verdict).plan(verdict, facts)
