"""A recipe runs as the model wrote it or not at all. The output guardrail scrubs the
verdict before it is stored, and scrubbing a command changes what it does: a token
becomes ``[REDACTED]``, which git reads as a pathspec matching files named R, E, D, A, C
or T. So a command the guardrail would rewrite, or that carries a mark it writes, is
refused, with a reason that never quotes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_graph import THRESHOLDS, context, model_decision

from orchestrator.domain.recipes import plan_recipe
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.recovery.graph import OutputGuardrail, run_graph
from orchestrator.recovery.graph_state import GraphDeps, GraphState
from orchestrator.recovery.verdict import validate_verdict_object
from orchestrator.redaction import scrub

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-ant-api03-Zq8Xw2Lm4Np6Rt0Vb3Yc5"
ALLOW = ("git",)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (f"git add {SECRET}", "scrubs"),
        ("git add [REDACTED]", "[REDACTED]"),
        ('git commit --author "Jane <jane.doe@example.com>" -m fix', "scrubs"),
        ("git add [EMAIL] [PHONE]", "[EMAIL], [PHONE]"),
    ],
)
def test_a_command_the_guardrail_would_rewrite_is_refused(
    tmp_path: Path, command: str, says: str
) -> None:
    argvs, errors = plan_recipe(["git status", command], clone_dir=tmp_path, allowlist=ALLOW)
    assert argvs == []
    [error] = errors
    assert error.startswith("[1]: ") and says in error
    assert SECRET not in error and "jane.doe" not in error


def test_commands_the_guardrail_leaves_alone_still_plan(tmp_path: Path) -> None:
    commands = ["git reset --soft HEAD~1", "git commit -m 'split: tests first'"]
    assert all(scrub(c)[0] == c for c in commands)
    argvs, errors = plan_recipe(commands, clone_dir=tmp_path, allowlist=ALLOW)
    assert errors == [] and len(argvs) == 2


def recipe_verdict(command: str) -> dict[str, object]:
    return {
        "action": "mechanical-fix",
        "summary": "stage the fix",
        "repair_plan": {"verification_check": "project-tests", "commands": [command]},
    }


def test_the_scrubbed_recipe_is_refused_not_run(tmp_path: Path) -> None:
    """The guardrail node stores the command scrubbed; what would be planned from it is
    a refusal, never ``git add [REDACTED]``."""
    ctx = context(tmp_path)
    state = OutputGuardrail().run(
        GraphState(ctx=ctx, decision=model_decision(recipe_verdict(f"git add {SECRET}"))),
        GraphDeps(gateway_factory=lambda: None, thresholds=THRESHOLDS),
    )
    assert state.decision is not None
    stored = state.decision.verdict.model_dump(mode="json")
    assert SECRET not in str(stored)
    commands = stored["repair_plan"]["commands"] if "repair_plan" in stored else []
    argvs, errors = plan_recipe(
        commands, clone_dir=ctx.decision.clone_dir, allowlist=ctx.decision.recipe_allowlist
    )
    assert argvs == [] and errors


def test_a_model_proposing_such_a_recipe_ends_in_a_refusal(tmp_path: Path) -> None:
    """Through the whole graph: the proposal fails its semantic check (each re-ask too),
    so the decision is abandon-human, with the reason, and no recipe."""
    reply = validate_verdict_object(recipe_verdict(f"git add {SECRET}"))[0]
    assert reply is not None
    text = reply.model_dump_json()
    gateway = ScriptedGateway([text] * 5)
    state = run_graph(
        context(tmp_path),
        GraphDeps(gateway_factory=lambda: gateway, thresholds=THRESHOLDS),
    )
    proposal = state.require_proposal()
    assert proposal.action.action == "abandon-human"
    assert "a rewritten command is not run" in proposal.action.summary
    assert SECRET not in proposal.model_dump_json()
