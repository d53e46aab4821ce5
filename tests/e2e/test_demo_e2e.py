"""The demo's two tickets through the real default config.toml: real clone, real patch
engine, real review checks, real push to a bare origin."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import git
import pytest

from orchestrator.app.driver import Services, run_ticket
from orchestrator.demo.run import build_demo
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.tickets import load_ticket

from conftest import ROOT
from support.sandbox_required import require_sandbox
from support.services import make_services


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Services, dict[str, Path], Path]:
    require_sandbox()  # every stage of the shipped config runs in it
    layout = build_demo(tmp_path / "demo")
    services = make_services(
        load_config(ROOT / "config.toml"),
        tmp_path / "state",
        environ={"PATH": "/usr/bin:/bin", "DRY_RUN": "false", "HOME": str(tmp_path)},
    )
    return services, dict(layout.tickets), layout.origin


@pytest.mark.slow
def test_without_recovery_the_squashed_fix_halts_at_review_on_commit_order(
    demo: tuple[Services, dict[str, Path], Path],
) -> None:
    services, tickets, origin = demo
    config = services.loaded.config
    recovery_off = config.model_copy(
        update={"recovery": config.recovery.model_copy(update={"enabled": False})}
    )
    services = replace(services, loaded=services.loaded.model_copy(update={"config": recovery_off}))
    record = run_ticket(load_ticket(tickets["CARDS-1"]), services)
    assert record.state is RunState.FAILED
    assert record.halt is not None
    assert (record.halt.reason, record.halt.stage) == (HaltReason.CHECK_FAILED, "review")
    review = record.attempts[-1]
    assert review.failing_check is not None
    assert review.failing_check.name == "lint-bug-commit-order"
    log = Path(review.failing_check.log_path or "").read_text()
    assert "touches both production code and tests" in log
    assert "lint-bug-commit-order: FAILED (1 violation(s))" in log
    assert [s.status.value for s in record.stages] == [
        "completed",
        "completed",
        "failed",
        "pending",
    ]
    assert "orch/CARDS-1" not in [h.name for h in git.Repo(origin).heads]


@pytest.mark.slow
def test_clean_bug_fix_reaches_a_recorded_pull_request(
    demo: tuple[Services, dict[str, Path], Path],
) -> None:
    services, tickets, origin = demo
    record = run_ticket(load_ticket(tickets["CARDS-2"]), services)
    assert record.state is RunState.COMPLETED, record.halt
    review = next(a for a in record.attempts if a.stage == "review")
    assert [(c.name, c.exit_code) for c in review.checks] == [
        ("lint-bug-commit-order", 0),
        ("project-tests", 0),
    ]
    assert record.pull_request is not None
    pr = json.loads(Path(record.pull_request).read_text())
    assert (pr["forge"], pr["head"], pr["base"]) == ("local", "orch/CARDS-2", "main")
    assert len(pr["commits"]) == 2
    pushed = git.Repo(origin).heads["orch/CARDS-2"].commit.hexsha
    assert pushed == pr["head_sha"]
    # Every stage and check ran in the sandbox (the shipped config's default), and the
    # check's log says so beside its command. The demo lives under /tmp here: what a
    # stage must read (the run's ticket, the origin) stays visible through the private /tmp.
    for attempt in record.attempts:
        if attempt.checks:
            assert {c.sandbox for c in attempt.checks if not c.skipped} == {"bwrap"}
        else:
            assert attempt.sandbox == "bwrap", attempt.stage
    assert review.log_path is not None
    assert "    # sandbox: bwrap, no network, writable: " in Path(review.log_path).read_text()


@pytest.mark.slow
def test_orchestrator_demo_runs_anywhere_with_its_packaged_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`orchestrator demo` from a directory with no config.toml: the three outcomes. The
    directory is named as a person's might be (a space, quotes, a non-ASCII letter: the
    state dir, every clone and the fix's recipe live under it): CARDS-1's fix is still
    planned, vetted and run (issue 27: its guardrail once cut the clone's path at the
    space and refused it)."""
    from orchestrator import starter
    from orchestrator.cli.main import main

    tmp_path = tmp_path / 'St ate "x" é'
    tmp_path.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRY_RUN", "true")  # the demo disarms it; restored afterwards
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for line in (
        "  CARDS-1: exit 0: completed (or nothing to do) — as expected",
        "  CARDS-2: exit 0: completed (or nothing to do) — as expected",
        "  CARDS-3: exit 3: needs a human (halted with a typed reason, or blocked by DRY_RUN) — as expected",
    ):
        assert line in out
    assert (tmp_path / ".state" / "demo" / "config.toml").read_text() == starter.config_text()
    assert not (tmp_path / "config.toml").exists()
    # ... and leaves the page a person would open, about its three runs.
    page = tmp_path / ".state" / "demo" / "report.html"
    assert f"report: 3 run(s) (every run) written to {page}" in out
    text = page.read_text()
    assert all(f"CARDS-{n}" in text for n in (1, 2, 3)) and "abandon-human" in text


@pytest.mark.slow
def test_the_demo_piped_into_head_ends_quietly_with_the_pipe_status(tmp_path: Path) -> None:
    """`orchestrator demo | head -1`: the demo stops when its reader goes away, with the
    status a shell reports for a closed pipe, and no traceback."""
    import subprocess

    from conftest import orchestrator_cmd, subprocess_env

    cmd = " ".join(orchestrator_cmd("demo"))
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd} | head -1"],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 141, proc.stderr
    assert proc.stdout.startswith("demo project built in ")
    assert "Traceback" not in proc.stderr
