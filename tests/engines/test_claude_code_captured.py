"""The ``claude-code`` adapter on what the released Claude Code 2.1.332 printed in the
contract tests (``tests/contract/test_claude_code.py``, captured with
``ORCHESTRATOR_CONTRACT_CAPTURE`` into ``tests/engines/data/claude-code/``, scrubbed):
turns as the model calls that answered, tokens from its own usage, its own cost, each
failure's class and words; and ``retries`` handed to it as CLAUDE_CODE_MAX_RETRIES."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.engines import EngineReport, EngineTask, FailureClass, claude_code
from orchestrator.engines.base import Usage
from orchestrator.execution.process import EXIT_TIMEOUT

from conftest import ROOT

DATA = ROOT / "tests" / "engines" / "data" / "claude-code"
F = FailureClass


def captured(name: str, *, cut: bool = False) -> str:
    """The captured output as the stage's log has it: our header, its lines, our footer.
    ``cut``: without its init event, as when the tail we read starts after it."""
    lines = (DATA / f"{name}.jsonl").read_text().splitlines()
    if cut:
        lines = [line for line in lines if '"subtype":"init"' not in line]
    return "\n".join(
        ["# orchestrator: 2026-01-01T00:00:00+00:00 cwd=/work/clone",
         "# $ claude -p --output-format stream-json --verbose --model claude-sonnet-4-6",
         *lines, "# orchestrator: exit 0 after 1.000s"]
    )  # fmt: skip


def report(name: str, exit_code: int = 1, timed_out: bool = False) -> EngineReport:
    return claude_code.ADAPTER.report(captured(name), exit_code, timed_out)


def test_a_fix_two_calls_with_its_tokens_and_its_own_cost() -> None:
    assert report("success", 0) == EngineReport(
        turns=2,
        cost_usd=0.005505,
        final_message="Fixed the greeting.",
        failure=None,
        detail=None,
        usage=Usage(1020, 60, cache_read_tokens=1400, cache_write_tokens=300),
    )


def test_a_bad_key_is_an_auth_error_with_no_call_answered() -> None:
    assert report("auth") == EngineReport(
        0, 0.0, "Invalid API key · Fix external API key", F.AUTH_ERROR,
        "Invalid API key · Fix external API key", Usage(0, 0, 0, 0),
    )  # fmt: skip


def test_an_overloaded_api_after_its_retries_is_an_outage() -> None:
    said = report("overloaded")
    assert (said.failure, said.turns, said.usage) == (F.OUTAGE, 0, Usage(0, 0, 0, 0))
    assert said.detail is not None and said.detail.startswith("API Error: 529 Overloaded.")


def test_the_turn_limit_is_code_and_counts_the_calls_not_num_turns() -> None:
    # Claude Code's num_turns is 3 here: it counts the turn --max-turns 2 refused.
    said = report("max_turns")
    assert (said.failure, said.detail) == (F.CODE, "Reached maximum number of turns (2)")
    assert (said.turns, said.usage) == (2, Usage(800, 50, 0, 0))
    assert said.cost_usd == pytest.approx(0.00315)


def test_stopped_by_our_timeout_it_keeps_what_the_answered_call_used() -> None:
    said = report("timeout", EXIT_TIMEOUT, timed_out=True)
    assert (said.failure, said.turns, said.cost_usd) == (F.TIMEOUT, 1, None)
    # No result: input and cache tokens from the call's event; its output is not known.
    assert said.usage == Usage(500, None, cache_read_tokens=0, cache_write_tokens=100)


@pytest.mark.parametrize(
    ("name", "exit_code", "turns"), [("success", 0, 2), ("auth", 1, 0), ("max_turns", 1, 2)]
)
def test_an_output_cut_before_its_init_counts_turns_from_num_turns(
    name: str, exit_code: int, turns: int
) -> None:
    said = claude_code.ADAPTER.report(captured(name, cut=True), exit_code, False)
    assert said.turns == turns


def test_retries_reach_claude_code_as_its_own_variable(tmp_path: Path) -> None:
    def env(settings: dict[str, object]) -> dict[str, str]:
        task = EngineTask(
            ticket_id="T-1", title="t", kind="feature", body="b", clone_dir=tmp_path,
            run_dir=tmp_path, model="claude-sonnet-4-6", settings=settings, attempt=1,
        )  # fmt: skip
        return dict(claude_code.ADAPTER.invocation(task).env)

    # None by default: an overloaded API ends the attempt, our back-off decides the wait.
    assert env({}) == {"CLAUDE_CODE_MAX_RETRIES": "0"}
    assert env({"retries": 3}) == {"CLAUDE_CODE_MAX_RETRIES": "3"}
