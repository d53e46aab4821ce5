"""A review check that fails for the machine's or the network's sake is told apart from
one that fails for the code's: real check processes, real tool output, a model that must
not be asked (nor its diagnosis charged)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.runs import RunStore

from conftest import write_ticket
from support.harness import Harness, make_origin, reply, write_pipeline

pytestmark = pytest.mark.slow


def review(command: str) -> str:
    # TOML literal string: the shell text goes in as written.
    return (
        '[[stages]]\nname = "review"\ncwd = "clone"\n'
        f"[[stages.checks]]\nname = \"project-tests\"\ncommand = ['bash', '-c', '''{command}''']\n"
    )


def run_review(tmp_path: Path, command: str, recovery: str = "") -> tuple[Harness, RunRecord]:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, review(command), recovery=recovery)
    gateway = ScriptedGateway([reply({"action": "abandon-human", "summary": "asked"})])
    h = Harness(config, gateway)
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    return h, record


def test_a_check_that_fills_the_disk_goes_to_a_person_without_a_diagnosis(
    tmp_path: Path,
) -> None:
    enospc = f"{sys.executable} -c \"raise OSError(28, 'No space left on device')\""
    h, record = run_review(tmp_path, f"echo running tests; {enospc}")
    assert record.state is RunState.NEEDS_HUMAN
    halt = record.halt
    assert halt is not None
    assert halt.reason is HaltReason.RESOURCE_EXHAUSTED
    assert "[disk-full]: OSError: [Errno 28] No space left on device" in halt.detail
    assert h.builds == 0 and h.budget() == (0, 0)
    attempt = record.attempts[-1]
    assert attempt.failure_class == "resource_exhausted"
    [check] = attempt.checks
    assert (check.failure_class, check.failure_detail) == (
        "resource_exhausted",
        attempt.failure_detail,
    )
    [verdict] = h.verdicts(record)
    assert (verdict["source"], verdict["action"]) == ("infra", "abandon-human")
    # What is on disk reads back as it was written.
    assert RunStore(h.services.storage.runs.state_dir).load(record.run_id) == record


def test_a_check_that_cannot_reach_a_host_is_retried_under_the_infra_cap(tmp_path: Path) -> None:
    clone = "GIT_TERMINAL_PROMPT=0 timeout 5 git clone -q https://registry.invalid/x.git dep"
    h, record = run_review(tmp_path, clone, recovery="max_infra_retries_per_ticket = 1\n")
    # The network's failure, not the ticket's: it waits for the next batch (issue 43).
    assert record.state is RunState.WAITING_INFRA
    assert record.halt is not None and record.halt.reason is HaltReason.INFRA_UNAVAILABLE
    sources = [(v["source"], v["action"]) for v in h.verdicts(record)]
    assert sources == [("infra", "retry"), ("infra", "abandon-human")]
    assert h.builds == 0 and h.budget() == (0, 0)
    assert h.slept == [30.0]  # the back-off, recorded not waited for
    failed = [a for a in record.attempts if a.stage == "review"]
    assert [a.failure_class for a in failed] == ["network", "network"]
    assert "Could not resolve host: registry.invalid" in (failed[0].failure_detail or "")


def test_a_checks_own_failure_class_line_is_honoured(tmp_path: Path) -> None:
    h, record = run_review(
        tmp_path,
        "echo ::failure-class::auth_error; echo token refused >&2; exit 3",
    )
    assert record.halt is not None and record.halt.reason is HaltReason.AUTH_ERROR
    assert h.builds == 0
    # An unknown class is ignored, as for a stage: the failure goes to the model.
    h, record = run_review(tmp_path / "unknown", "echo ::failure-class::gremlins; exit 3")
    assert h.builds == 1
    [verdict] = h.verdicts(record)
    assert verdict["source"] == "model"
    assert record.attempts[-1].failure_class is None


def test_an_assertion_after_a_refused_connection_is_still_the_codes(tmp_path: Path) -> None:
    output = (
        "echo 'WARNING client: [Errno 111] Connection refused (retrying)'; "
        "echo 'E       assert 3 == 4'; "
        "echo 'FAILED tests/test_total.py::test_total - assert 3 == 4'; exit 1"
    )
    h, record = run_review(tmp_path, output)
    assert h.builds == 1  # the model was asked: this is the code's failure
    assert record.attempts[-1].failure_class is None


def test_a_crashed_engine_that_ran_out_of_memory_goes_to_a_person(tmp_path: Path) -> None:
    """A crash is retried; a crash whose last words are the shell's report of a SIGKILL
    (137, "Killed": how an OOM kill looks) is not — a person frees memory first."""
    make_origin(tmp_path)
    killer = f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'"
    body = (
        f"[engines.coder]\ncommand = ['bash', '-c', '''{killer}; exit $?''']\n"
        '[[stages]]\nname = "implement"\nengine = "coder"\n'
    )
    h = Harness(write_pipeline(tmp_path, body), ScriptedGateway([]))
    record = h.run(write_ticket(tmp_path / "t"))
    attempt = record.attempts[-1]
    assert (attempt.exit_code, attempt.failure_class) == (137, "resource_exhausted")
    assert "[oom-kill]: bash: line 1:" in (attempt.failure_detail or "")
    assert record.halt is not None and record.halt.reason is HaltReason.RESOURCE_EXHAUSTED
    assert h.builds == 0 and h.slept == []


def test_a_check_whose_program_is_not_installed_is_a_configuration_error(tmp_path: Path) -> None:
    """As for a stage: nothing ran, so no model is asked; the run fails naming it."""
    make_origin(tmp_path)
    body = (
        '[[stages]]\nname = "review"\ncwd = "clone"\n'
        '[[stages.checks]]\nname = "lint"\ncommand = ["no-such-linter-xyz", "."]\n'
    )
    h = Harness(write_pipeline(tmp_path, body), ScriptedGateway([]))
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CONFIG_ERROR
    assert "executable not found: no-such-linter-xyz" in record.halt.detail
    [check] = record.attempts[-1].checks
    assert check.failure_class == "config_error" and h.builds == 0


def test_open_pr_without_a_token_fails_as_configured_and_asks_no_model(tmp_path: Path) -> None:
    """A missing GITHUB_TOKEN is the machine's, not the change's (issue 27): the run fails
    as configured (its hand-off names the variable), with no diagnosis asked or charged
    and no retry waiting for approval; `orchestrator resume` continues it once set."""
    make_origin(tmp_path)
    open_pr = (
        '[[stages]]\nname = "open-pr"\nside_effectful = true\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr_github"]\n'
    )
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "asked"})])
    h = Harness(write_pipeline(tmp_path, open_pr), gateway)
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CONFIG_ERROR
    # The person reading the hand-off is told which variable to set.
    handoff = RunStore(tmp_path / "state").handoff_path(record.run_id).read_text()
    assert "open-pr: GITHUB_TOKEN is not set" in handoff
    assert h.builds == 0 and h.budget() == (0, 0)
    assert record.attempts[-1].failure_class == "config_error"
