"""Real coding engines in the pipeline, played by fake executables on PATH that speak the
tools' recorded output formats: their work is committed by the orchestrator, and
infrastructure failures are answered deterministically, never by the model."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway

from conftest import write_ticket
from support.harness import CLAUDE, FAKES, Harness, make_origin, write_pipeline

pytestmark = pytest.mark.slow


def harness(tmp_path: Path, mode: str, gateway: ScriptedGateway) -> Harness:
    make_origin(tmp_path)
    environ = {
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "DRY_RUN": "false",
        "FAKE_ENGINE_MODE": mode,
    }
    return Harness(write_pipeline(tmp_path, CLAUDE), gateway, environ=environ)


def test_a_successful_engine_run_is_recorded_and_its_work_committed(tmp_path: Path) -> None:
    h = harness(tmp_path, "success", ScriptedGateway([]))
    record = h.run(write_ticket(tmp_path / "t", kind="feature", body="Add a greeting."))
    assert record.state is RunState.COMPLETED, record.halt
    attempt = record.attempts[-1]
    assert (attempt.engine, attempt.model) == ("claude", "claude-haiku-4-5")
    assert attempt.turns is not None and attempt.cost_usd is not None and attempt.final_message
    assert attempt.failure_class is None
    clone = git.Repo(record.clone_dir)
    assert clone.head.commit.message.strip() == "Ticket T-1"
    assert "CHANGED_BY_CLAUDE.txt" in clone.head.commit.stats.files


def test_a_rate_limited_engine_is_retried_after_back_offs_without_asking_the_model(
    tmp_path: Path,
) -> None:
    gateway = ScriptedGateway([])
    h = harness(tmp_path, "rate_limited", gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert gateway.calls == 0 and h.builds == 0
    assert [a.failure_class for a in record.attempts[1:]] == ["rate_limited"] * 4
    assert h.slept == [30.0, 60.0, 120.0]  # doubling back-off, recorded not waited for
    # The provider's throttle is the world's: the back-off used up, it waits (issue 43).
    assert record.state is RunState.WAITING_INFRA
    assert record.halt is not None and record.halt.reason is HaltReason.INFRA_UNAVAILABLE
    sources = {v.source for v in record.verdicts}
    assert sources == {"infra"}
    assert h.budget() == (0, 0)  # neither a diagnosis nor a code retry was spent


def test_an_auth_failure_goes_straight_to_a_person(tmp_path: Path) -> None:
    gateway = ScriptedGateway([])
    h = harness(tmp_path, "auth", gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert gateway.calls == 0
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.AUTH_ERROR
    assert "auth_error" in record.halt.detail and h.slept == []


def test_a_code_failure_still_goes_to_the_decision(tmp_path: Path) -> None:
    gateway = ScriptedGateway(
        [
            '{"action": "escalate-model", "summary": "needs the bigger model"}',
            '{"action": "abandon-human", "summary": "still out of turns"}',
        ]
    )
    h = harness(tmp_path, "error", gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert gateway.calls == 2  # one diagnosis per code failure
    assert [(a.model, a.failure_class) for a in record.attempts[1:]] == [
        ("claude-haiku-4-5", "code"),
        ("claude-sonnet-4-6", "code"),
    ]
    assert record.halt is not None and record.halt.reason is HaltReason.ABANDONED


def test_a_command_engine_reads_its_prompt_file_through_the_sandbox(tmp_path: Path) -> None:
    """Its prompt is a file in the run dir ({prompt_file}; aider's --message-file is one
    too): the engine, sandboxed like every stage, must be able to read it."""
    from support.sandbox_required import require_sandbox

    require_sandbox()
    make_origin(tmp_path)
    copy = "import shutil, sys; shutil.copy(sys.argv[1], 'PROMPT_SEEN.txt')"
    engine = (
        '[engines.mine]\nkind = "command"\nmodels = ["m"]\n'
        f'command = ["{{python}}", "-c", "{copy}", "{{prompt_file}}"]\n'
        '[[stages]]\nname = "implement"\nengine = "mine"\n'
    )
    h = Harness(
        write_pipeline(tmp_path, engine), ScriptedGateway([]),
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DRY_RUN": "false"},
    )  # fmt: skip
    record = h.run(write_ticket(tmp_path / "t", kind="feature", body="Add a greeting."))
    assert record.state is RunState.COMPLETED, (record.halt, h.out.getvalue())
    clone = git.Repo(record.clone_dir)
    assert "Add a greeting." in (Path(record.clone_dir) / "PROMPT_SEEN.txt").read_text()
    assert "PROMPT_SEEN.txt" in clone.head.commit.stats.files
