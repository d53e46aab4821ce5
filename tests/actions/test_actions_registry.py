"""The vocabulary is where the action names come from: an action registered there reaches the
CLI's choices, the ``[routing]`` keys and defaults, the prompt, and verification."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.actions.registry import REGISTRY
from orchestrator.cli.main import build_parser, main
from orchestrator.domain.config import parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.proposals import PromptFacts, Source
from orchestrator.domain.validation import Frozen
from orchestrator.domain.verdicts import (
    VERDICT_ADAPTER,
    Action,
    DecisionContext,
    SwitchEngineVerdict,
)
from orchestrator.domain.vocabulary import VOCABULARY, ActionTerms, rule_checks, semantic_errors
from orchestrator.recovery.graph import verification_checks
from orchestrator.recovery.graph_state import Guardrail
from orchestrator.recovery.prompt import build_prompt

from conftest import ROOT, subprocess_env
from support.scripted_cli import run_forked


class RebaseVerdict(Frozen):
    action: str
    summary: str


REBASE = ActionTerms(
    name="rebase",
    verdict_type=RebaseVerdict,
    routing_default=0.42,
    prompt="the branch is stale; rebase it onto its base",
    checks=lambda verdict, ctx: {"base_is_known": True},
)

FACTS = PromptFacts(
    ticket_id="T-1", ticket_kind="bug-fix", failing_stage="review", failing_check="lint",
    current_engine=None, current_model=None, engines={}, recipe_allowlist=["git"],
)  # fmt: skip


def test_a_registered_action_reaches_the_cli_routing_and_prompt(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config_text = (ROOT / "config.toml").read_text()
    with VOCABULARY.registered(REBASE):
        # CLI: a choice of `verdicts --action` (and listed in its help).
        args = build_parser().parse_args(["verdicts", "--action", "rebase"])
        assert args.action == "rebase"
        assert main(["--state-dir", str(tmp_path), "verdicts", "--action", "rebase"]) == 0
        # Routing: a key [routing] accepts, with the action's own default when unset.
        routed = parse_config(
            config_text.replace("[routing]", "[routing]\nrebase = 0.3"), Path("c.toml")
        )
        assert routed.routing.by_action()["rebase"] == 0.3
        assert parse_config(config_text, Path("c.toml")).routing.by_action()["rebase"] == 0.42
        # Prompt: the vocabulary line, after the built-in ones.
        prompt = build_prompt(FACTS, "bundle")
        assert "- rebase {summary}: the branch is stale; rebase it onto its base" in prompt
        assert prompt.index("- mechanical-fix {") < prompt.index("- rebase {")
    # Gone again: each of them refuses it.
    with pytest.raises(SystemExit):
        build_parser().parse_args(["verdicts", "--action", "rebase"])
    assert "invalid choice: 'rebase'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="routing: unknown key 'rebase': not an action"):
        parse_config(config_text.replace("[routing]", "[routing]\nrebase = 0.3"), Path("c.toml"))
    assert "- rebase {" not in build_prompt(FACTS, "bundle")


def test_an_actions_checks_are_verification_signals() -> None:
    ctx = DecisionContext(
        failing_stage="review", failing_check="lint", code_stage="implement",
        current_engine="coder", current_model="small", ladders={"coder": ("small",)},
        clone_dir=Path("/c"), recipe_allowlist=("git",),
    )  # fmt: skip
    switch = {"action": "switch-engine", "summary": "s", "engine": "coder"}
    checks = verification_checks(switch, ctx, Guardrail())
    assert checks == {
        "in_enum": True, "schema_ok": True, "engine_exists": True, "rules_ok": False,
        "guardrail_ok": True,
    }  # fmt: skip
    verdict = SwitchEngineVerdict(action="switch-engine", summary="s", engine="coder")
    assert semantic_errors(verdict, ctx) == ["engine: 'coder' is the engine that just failed"]
    assert rule_checks(verdict, ctx) == {"engine_exists": True}
    assert (
        verification_checks({"action": "rebase", "summary": "s"}, ctx, Guardrail())["in_enum"]
        is False
    )
    with VOCABULARY.registered(REBASE):
        assert verification_checks({"action": "rebase", "summary": "s"}, ctx, Guardrail())[
            "in_enum"
        ]


def test_the_built_in_actions_are_the_verdict_schemas_and_in_the_prompts_order() -> None:
    schema = VERDICT_ADAPTER.json_schema()
    in_schema = sorted(
        definition["properties"]["action"]["const"] for definition in schema["$defs"].values()
        if "action" in definition.get("properties", {})
    )  # fmt: skip
    assert VOCABULARY.names() == tuple(a.value for a in Action)
    assert sorted(VOCABULARY.names()) == in_schema
    assert all(terms.verdict_type.model_fields["action"] for terms in VOCABULARY.terms())
    # Every word of the vocabulary can be carried out, and nothing else can.
    assert REGISTRY.names() == VOCABULARY.names()
    assert VOCABULARY.routing_defaults() == {
        "retry": 0.8, "escalate-model": 0.8, "switch-engine": 0.8, "split": 0.9,
        "abandon-human": 0.0, "mechanical-fix": 0.85,
    }  # fmt: skip


def test_registering_twice_or_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="'retry' is already registered"):
        VOCABULARY.register(VOCABULARY.get("retry"))
    with pytest.raises(ValueError, match="'retry' is already registered"):
        REGISTRY.register(REGISTRY.get("retry"))
    with pytest.raises(ValueError, match="routing default must be within"):
        VOCABULARY.register(ActionTerms(**{**REBASE.__dict__, "routing_default": 1.5}))
    assert "rebase" not in VOCABULARY


@pytest.mark.slow
def test_every_decision_source_is_a_cli_choice(tmp_path: Path) -> None:
    """``verdicts --source infra`` lists infrastructure decisions (the table prints that
    source, so the filter accepts it)."""
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True)
    for source in Source:
        assert main(["--state-dir", str(state), "verdicts", "--source", source.value]) == 0
    result = run_forked(  # its own process, forked as `python -m orchestrator` starts
        Path.cwd(), ["--state-dir", str(state), "verdicts", "--source", "infra", "--json"],
        subprocess_env(), as_entry=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == []


def test_building_the_parser_loads_no_pydantic() -> None:
    """The choices are read when used, not when the parser is built: `--help` and the
    read-only commands keep their start-up."""
    code = (
        "import sys; from orchestrator.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
