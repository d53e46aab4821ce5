"""A coding engine (or a stage's program) that is not installed is a configuration error:
the run stops at once, ``failed`` with reason ``config_error`` naming the executable —
no retry, no back-off, no model call."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.engines import EngineReport, FailureClass, classify
from orchestrator.engines.classify import INFRA, missing_executable
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.budget import BudgetStore

from conftest import write_ticket
from support.harness import CLAUDE, Harness, make_origin, write_pipeline

R_CRASHED = EngineReport(None, None, None, FailureClass.ENGINE_ERROR, "exit 127: x")


def bare_path(tmp_path: Path) -> str:
    """A PATH with git and bash and nothing else: no coding engine can be on it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "bash"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def failed_fast(
    tmp_path: Path, pipeline: str, executable: str
) -> tuple[Harness, ScriptedGateway, RunRecord]:
    """Run a ticket through ``pipeline`` with only git and bash on the PATH, and check it
    failed as a configuration error naming ``executable``."""
    make_origin(tmp_path)
    bin_dir = bare_path(tmp_path)
    environ = {"PATH": bin_dir, "HOME": str(tmp_path), "DRY_RUN": "false"}
    gateway = ScriptedGateway([])
    # A PATH directory outside the system's is not in the sandbox unless a stage declares
    # it readable, as a user would (the clone stage and the last one run git from it).
    config = write_pipeline(tmp_path, pipeline + f'readable = ["{bin_dir}"]\n')
    config.write_text(
        config.read_text().replace('cwd = "run"\n', f'cwd = "run"\nreadable = ["{bin_dir}"]\n')
    )
    h = Harness(config, gateway, environ=environ)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CONFIG_ERROR
    assert f"executable not found: {executable}" in record.halt.detail
    return h, gateway, record


@pytest.mark.slow
def test_an_engine_that_is_not_installed_fails_fast_naming_it(tmp_path: Path) -> None:
    h, gateway, record = failed_fast(tmp_path, CLAUDE, "claude")
    implement = [a for a in record.attempts if a.stage == "implement"]
    assert len(implement) == 1  # never retried
    assert (implement[0].exit_code, implement[0].failure_class) == (127, "config_error")
    assert gateway.calls == 0 and h.builds == 0 and h.slept == []
    assert [(v.source, v.action) for v in record.verdicts] == [("infra", "abandon-human")]
    budget = BudgetStore(h.services.storage.runs.state_dir).load("T-1")
    assert budget.charges == ()  # neither an infra retry nor a diagnosis was spent


@pytest.mark.slow
def test_a_stage_program_that_is_not_installed_fails_fast_too(tmp_path: Path) -> None:
    stage = '[[stages]]\nname = "lint"\ncommand = ["no-such-linter-xyz", "--check"]\n'
    h, gateway, record = failed_fast(tmp_path, stage, "no-such-linter-xyz")
    assert len([a for a in record.attempts if a.stage == "lint"]) == 1
    assert gateway.calls == 0 and h.builds == 0


def test_a_missing_working_directory_is_not_a_missing_executable() -> None:
    assert missing_executable("executable not found: claude") == "claude"
    assert missing_executable("working directory not found: /x/clone") is None
    assert missing_executable(None) is None
    assert missing_executable("cannot execute claude: Permission denied") is None


@pytest.mark.parametrize(
    ("start_error", "expected"),
    [
        ("executable not found: claude", FailureClass.CONFIG_ERROR),
        ("working directory not found: /x", FailureClass.ENGINE_ERROR),
        (None, FailureClass.ENGINE_ERROR),
    ],
)
def test_classify_names_a_missing_executable_a_configuration_error(
    start_error: str | None, expected: FailureClass
) -> None:
    assert classify(127, False, R_CRASHED, start_error=start_error) is expected


def test_a_configuration_error_is_not_code_so_never_reaches_the_model() -> None:
    assert FailureClass.CONFIG_ERROR in INFRA


def test_the_harness_path_really_has_no_engine(tmp_path: Path) -> None:
    path = bare_path(tmp_path)
    assert all(shutil.which(tool, path=path) is None for tool in ("claude", "codex", "aider"))
    assert os.pathsep not in path
