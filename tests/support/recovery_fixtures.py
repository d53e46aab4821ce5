"""The failure most recovery tests decide about: a bug-fix ticket whose review check
``project-tests`` failed after the ``patch`` engine's ``small`` model wrote the code."""

from __future__ import annotations

from pathlib import Path

from orchestrator.domain.proposals import PromptFacts, facts_for
from orchestrator.domain.verdicts import DecisionContext


def decision_context(
    clone: Path = Path("/nonexistent/clone"), **changes: object
) -> DecisionContext:
    values: dict[str, object] = {
        "failing_stage": "review",
        "failing_check": "project-tests",
        "code_stage": "implement",
        "current_engine": "patch",
        "current_model": "small",
        "ladders": {"patch": ("small", "large"), "aider": ("m",)},
        "clone_dir": clone,
        "recipe_allowlist": ("git",),
    }
    values.update(changes)
    return DecisionContext(**values)  # type: ignore[arg-type]


def prompt_facts(ctx: DecisionContext | None = None) -> PromptFacts:
    return facts_for(ctx or decision_context(), "T-1", "bug-fix")
