"""Each verdict action on its own: its plan (pure, pinned from plain values), its apply
(against a real clone in a temp dir where it mutates), and the dispatcher around them
(budget charges, infra back-off returned as an effect, never slept)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest

from orchestrator.actions import abandon, budget, mechanical_fix, rerun, split
from orchestrator.actions.plan import DecisionToApply, Dispatch, PlanFacts
from orchestrator.actions.registry import plan_dispatch
from orchestrator.app import substrate
from orchestrator.app.services import Services
from orchestrator.domain.config import Config, LoadedConfig, parse_config
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.runs import (
    RunRecord,
    StageOverride,
    StageRecord,
    StageStatus,
    new_run_id,
)
from orchestrator.domain.tickets import load_ticket
from orchestrator.domain.verdicts import (
    AbandonHumanVerdict,
    EscalateModelVerdict,
    MechanicalFixVerdict,
    RepairPlan,
    RetryVerdict,
    SplitVerdict,
    SubTicket,
    SwitchEngineVerdict,
    Verdict,
)
from orchestrator.storage.approvals import Approval
from orchestrator.storage.budget import BudgetStore

from support.gitrepo import commit_files, init_repo
from support.recording_executor import RecordingExecutor, unwrapped
from support.services import make_services

CONFIG = """
state_dir = "state"
[recovery]
max_retries_per_ticket = 1
max_infra_retries_per_ticket = 2
infra_backoff_s = 30.0
recipe_allowlist = ["git"]

[engines.coder]
command = ["bash", "-c", "true"]
models = ["small", "large"]

[engines.other]
command = ["bash", "-c", "true"]
models = ["o1", "o2"]

[[stages]]
name = "clone"
command = ["bash", "-c", "true"]
cwd = "run"

[[stages]]
name = "implement"
engine = "coder"

[[stages]]
name = "review"
cwd = "clone"

[[stages.checks]]
name = "lint"
command = ["bash", "-c", "test -f fixed"]
"""
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def config() -> Config:
    return parse_config(CONFIG, Path("/nowhere/config.toml"))


def record(root: Path, **update: Any) -> RunRecord:
    run_id = new_run_id("T-1", NOW)
    run_dir = root / "state" / "runs" / run_id
    base = RunRecord(
        run_id=run_id,
        ticket_id="T-1",
        ticket_title="Ticket T-1",
        ticket_kind="bug-fix",
        ticket_path=str(root / "tickets" / "T-1.md"),
        ticket_snapshot=str(run_dir / "ticket" / "T-1.md"),
        ticket_sha256="0" * 64,
        repository=str(root / "origin.git"),
        base_branch="main",
        work_branch="orchestrator/T-1",
        config_path=str(root / "config.toml"),
        config_sha256="",
        run_dir=str(run_dir),
        clone_dir=str(run_dir / "clone"),
        created_at=NOW,
        updated_at=NOW,
        state=RunState.RECOVERING,
        stages=(
            StageRecord(name="clone", status=StageStatus.COMPLETED),
            StageRecord(name="implement", status=StageStatus.COMPLETED),
            StageRecord(name="review", status=StageStatus.FAILED),
        ),
    )
    return base.model_copy(update=update)


def facts(
    rec: RunRecord, *, failing: str = "review", check: str | None = "lint", **more: Any
) -> PlanFacts:
    cfg = config()
    return PlanFacts(
        config=cfg,
        record=rec,
        approval=more.pop("approval", "auto"),
        failing=cfg.stage(failing),
        code=cfg.stage("implement"),
        failing_check=check,
        halt_reason=more.pop("halt_reason", None),
        cap_exhausted=more.pop("cap_exhausted", False),
    )


def proposal(
    verdict: Verdict,
    *,
    routing: str = "auto",
    stage: str = "review",
    check: str | None = "lint",
    infra: str | None = None,
) -> Proposal:
    # The one place these tests build a proposal: its shape is the recovery graph's.
    return Proposal.model_validate(
        {
            "decision_id": "d-1",
            "capability": "stage-recovery",
            "action": verdict,
            "confidence": 1.0,
            "routing": routing,
            "reasoning": ("because",),
            "evidence": {
                "source": {"source": "model", "valid": True},
                "failure": {
                    "stage": stage, "check": check, "attempt": 3, "signature": "review/lint",
                    "infra": infra,
                },
                "bundle": {"path": None, "inputs_hash": "h"},
            },
        }
    )  # fmt: skip


def approval(number: int = 1, *, approved: bool = True) -> Approval:
    return Approval(
        decision_id="d-1", run_id="r", verdict=number, approved=approved, by="auto", at=NOW,
        routing="auto", reason=None if approved else "no",
    )  # fmt: skip


MECH = MechanicalFixVerdict(
    action="mechanical-fix",
    summary="bring the file back",
    repair_plan=RepairPlan(
        verification_check="lint",
        commands=("git checkout fix-branch -- fixed", "git commit -m 'bring fixed back'"),
    ),
)


# ---- plans: pure ---------------------------------------------------------------------


def test_retry_re_runs_the_code_stage_before_a_failed_check(tmp_path: Path) -> None:
    verdict = RetryVerdict(action="retry", summary="flaky")
    assert rerun.plan_retry(verdict, facts(record(tmp_path))) == Dispatch(
        "retry", "auto", rerun="implement"
    )
    # A failed engine stage re-runs itself.
    plain = facts(record(tmp_path), failing="implement", check=None)
    plain = PlanFacts(**{**plain.__dict__, "code": plain.failing})
    assert rerun.plan_retry(verdict, plain).rerun == "implement"


def test_escalate_takes_the_next_model_from_where_the_run_stands(tmp_path: Path) -> None:
    verdict = EscalateModelVerdict(action="escalate-model", summary="weak")
    assert rerun.plan_escalate(verdict, facts(record(tmp_path))) == Dispatch(
        "escalate-model", "auto", rerun="implement", engine="coder", model="large"
    )
    at_top = record(tmp_path, overrides={"implement": StageOverride(engine="coder", model="large")})
    assert rerun.plan_escalate(verdict, facts(at_top)).model is None
    gone = record(tmp_path, overrides={"implement": StageOverride(engine="gone", model="x")})
    assert rerun.plan_escalate(verdict, facts(gone)).error == "engine 'gone' is not configured"


def test_switch_engine_starts_at_the_named_engines_first_model(tmp_path: Path) -> None:
    verdict = SwitchEngineVerdict(action="switch-engine", summary="s", engine="other")
    assert rerun.plan_switch(verdict, facts(record(tmp_path), approval="person")) == Dispatch(
        "switch-engine", "person", rerun="implement", engine="other", model="o1"
    )
    unknown = SwitchEngineVerdict(action="switch-engine", summary="s", engine="nope")
    assert rerun.plan_switch(unknown, facts(record(tmp_path))).error == (
        "engine 'nope' is not configured"
    )


def test_split_ends_split_with_the_sub_ticket_titles(tmp_path: Path) -> None:
    verdict = SplitVerdict(
        action="split",
        summary="two things",
        sub_tickets=(SubTicket(title="a", body="A"), SubTicket(title="b", body="B")),
    )
    assert split.plan(verdict, facts(record(tmp_path))) == Dispatch(
        "split", "auto", terminal="split", sub_tickets=("a", "b")
    )


def test_abandon_ends_with_the_recorded_halt(tmp_path: Path) -> None:
    verdict = AbandonHumanVerdict(action="abandon-human", summary="no")
    rec = record(tmp_path)
    assert abandon.plan(verdict, facts(rec)) == Dispatch(
        "abandon-human", "auto", terminal="needs-human", halt="abandoned"
    )
    assert abandon.plan(verdict, facts(rec, halt_reason="invalid_verdict")).halt == (
        "invalid_verdict"
    )
    assert abandon.plan(verdict, facts(rec, cap_exhausted=True)) == Dispatch(
        "abandon-human", "auto", terminal="failed", halt="cap_exhausted"
    )


def test_mechanical_fix_plans_its_recipe_verifier_and_fallback(tmp_path: Path) -> None:
    rec = record(tmp_path)
    assert mechanical_fix.plan(MECH, facts(rec)) == Dispatch(
        "mechanical-fix", "auto", rerun="review", fallback="implement",
        recipe=(
            ("git", "checkout", "fix-branch", "--", "fixed"),
            ("git", "commit", "-m", "bring fixed back"),
        ),
        verify_check="lint",
    )  # fmt: skip
    refused = MECH.model_copy(
        update={"repair_plan": RepairPlan(verification_check="lint", commands=("rm -rf x",))}
    )
    planned = mechanical_fix.plan(refused, facts(rec))
    assert planned.recipe == () and planned.recipe_errors
    assert planned.describe() == "recipe refused → re-run implement"


def test_the_dispatch_plan_never_runs_a_rejected_proposal(tmp_path: Path) -> None:
    rec = record(tmp_path)
    retry = RetryVerdict(action="retry", summary="flaky")
    assert plan_dispatch(proposal(retry, routing="reject"), config(), rec) == Dispatch(
        "abandon-human", "auto", terminal="needs-human", halt="abandoned"
    )
    assert plan_dispatch(proposal(retry, stage="gone"), config(), rec).error == (
        "stage 'gone' is not in today's config"
    )
    assert plan_dispatch(proposal(retry, routing="hitl_required"), config(), rec).describe() == (
        "re-run implement, once a person approves"
    )


# ---- apply: real files, a real clone ---------------------------------------------------


def services(root: Path, executor: RecordingExecutor | None = None) -> Services:
    cfg_path = root / "config.toml"
    cfg_path.write_text(CONFIG)
    loaded = LoadedConfig(config=config(), path=cfg_path, root=root, sha256="")
    return make_services(
        loaded,
        root / "state",
        environ={"PATH": os.environ["PATH"], "HOME": str(root)},
        executor=executor or RecordingExecutor(),
        sleep=lambda seconds: pytest.fail(f"the mutator slept {seconds}s"),
    )


def applying(verdict: Verdict, number: int = 1, **kw: Any) -> DecisionToApply:
    return DecisionToApply(
        proposal=proposal(verdict, **kw),
        approval=approval(number),
        verdict=verdict,
        failing_stage=config().stage("review"),
        source="model",
        reason="because",
        bundle_path=None,
    )


def make_clone(rec: RunRecord) -> git.Repo:
    """The run's clone: ``fixed`` exists only on ``fix-branch``; HEAD is on main."""
    repo = init_repo(Path(rec.clone_dir))
    commit_files(repo, {"README.md": "hi\n"}, "initial")
    repo.git.checkout("-b", "fix-branch")
    commit_files(repo, {"fixed": "yes\n", "other": "o\n"}, "the fix")
    repo.git.checkout("main")
    Path(rec.ticket_snapshot).parent.mkdir(parents=True, exist_ok=True)
    Path(rec.ticket_snapshot).write_text('+++\nid = "T-1"\n+++\nx\n')
    return repo


def test_rerun_apply_resets_from_the_stage_and_sets_the_override(tmp_path: Path) -> None:
    rec = record(tmp_path)
    verdict = EscalateModelVerdict(action="escalate-model", summary="weak")
    plan = rerun.plan_escalate(verdict, facts(rec))
    after, effect = rerun.apply(rec, applying(verdict), plan, services(tmp_path))
    assert effect.resume_at == "implement" and effect.terminal is None
    assert effect.outcome == "escalate-model: re-running implement with coder/large"
    assert after.overrides["implement"] == StageOverride(engine="coder", model="large")
    assert [s.status for s in after.stages] == [
        StageStatus.COMPLETED, StageStatus.PENDING, StageStatus.PENDING,
    ]  # fmt: skip


def test_abandon_apply_writes_the_hand_off(tmp_path: Path) -> None:
    rec = record(tmp_path)
    verdict = AbandonHumanVerdict(action="abandon-human", summary="needs a person")
    plan = abandon.plan(verdict, facts(rec))
    after, effect = abandon.apply(rec, applying(verdict), plan, services(tmp_path))
    assert effect.terminal is RunState.NEEDS_HUMAN and effect.halt is not None
    assert effect.halt.reason is HaltReason.ABANDONED and effect.halt.stage == "review"
    assert after.handoff is not None
    text = Path(after.handoff).read_text()
    assert "**Why:** model verdict 1: needs a person" in text
    assert "- verdict 1 (model): `abandon-human` — because" in text


def test_split_apply_writes_tickets_the_loader_reads_back(tmp_path: Path) -> None:
    rec = record(tmp_path)
    title = 'Fix "quoted" 🎉 and a \\ backslash\nsecond line'
    verdict = SplitVerdict(
        action="split",
        summary="two things",
        sub_tickets=(
            SubTicket(title=title, body="Do A.\n+++\nstill the body"),
            SubTicket(title="b", body="Do B."),
        ),
    )
    plan = split.plan(verdict, facts(rec))
    after, effect = split.apply(rec, applying(verdict), plan, services(tmp_path))
    assert effect.terminal is RunState.SPLIT and len(after.sub_tickets) == 2
    first = load_ticket(Path(after.sub_tickets[0]))
    assert (first.fields.id, first.fields.title, first.fields.parent) == ("T-1.1", title, "T-1")
    assert first.body.startswith("Do A.\n+++\nstill the body\n\n(Split from T-1 by run ")
    # Redelivered: the same files are found and kept; nothing new is written.
    again, _ = split.apply(rec, applying(verdict), plan, services(tmp_path))
    assert again.sub_tickets == after.sub_tickets
    assert sorted(p.name for p in (tmp_path / "tickets").iterdir()) == ["T-1.1.md", "T-1.2.md"]


@pytest.mark.slow
def test_a_green_mechanical_fix_resumes_at_the_failed_stage(tmp_path: Path) -> None:
    rec = record(tmp_path)
    make_clone(rec)
    executor = RecordingExecutor()
    svc = services(tmp_path, executor)
    after, effect = mechanical_fix.apply(
        rec, applying(MECH), mechanical_fix.plan(MECH, facts(rec)), svc
    )
    assert effect.resume_at == "review" and effect.outcome == "mechanical-fix green: lint passes"
    assert after.stage_status("implement") is StageStatus.COMPLETED
    assert after.stage_status("review") is StageStatus.PENDING
    assert (Path(rec.clone_dir) / "fixed").exists()
    report = json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id, 1).read_text())
    assert report["status"] == "green" and report["verification"]["exit_code"] == 0
    # Every process went through the executor, the orchestrator's own git included.
    status = ("git", "status", "--porcelain=v1", "-z", "--untracked-files=all")
    # The clone's own config (refused if tampered), then as git applies it (its drivers
    # switched off): before the recipe, after each of its commands, in the checkout.
    own = ("git", "config", "-z", "--list", "--no-includes", "--show-scope")
    applied = ("git", "config", "-z", "--list", "--includes", "--show-scope")
    assert executor.captured == [
        own, applied,
        ("git", "rev-parse", "HEAD"),
        status,
        own, applied, own, applied,
        status,
        ("git", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
         report["head_before"], "HEAD"),
        ("git", "rev-parse", "HEAD"),
        own, applied,
        # The verifier's sandbox: the user's identity, for its commits (stage_sandbox).
        ("git", "config", "--global", "-z", "--get-regexp", r"^user\.(name|email)$"),
    ]  # fmt: skip
    checkout = str(Path(rec.run_dir) / "verify-1")
    # The recipe's commands, the check and every git call of ours that checks files out
    # or reads the work tree ran in the sandbox (after its once-per-process probe, which
    # this test sees only when it is the first to start one); outside it only what runs
    # nothing: config listings and rev-parse.
    ran = [argv for argv in executor.ran if argv != ("true",)]
    assert ran == [
        ("git", "checkout", "fix-branch", "--", "fixed"),
        ("git", "commit", "-m", "bring fixed back"),
        ("git", "worktree", "prune"),
        ("git", "worktree", "add", "--detach", "--no-checkout", checkout, "HEAD"),
        ("git", "reset", "--hard", "--quiet", "HEAD"),  # filled once its config is read
        ("bash", "-c", "test -f fixed"),  # in the checkout of what ships
        ("git", "worktree", "remove", "--force", "--force", checkout),
        ("git", "worktree", "prune"),
    ]
    sandboxed = {unwrapped(argv) for argv in executor.raw if unwrapped(argv) != argv}
    assert set(ran) | {status, report_diff(report)} <= sandboxed
    outside = {argv for argv in executor.raw if unwrapped(argv) == argv} - {("true",)}
    assert {argv[:2] for argv in outside} <= {("git", "config"), ("git", "rev-parse")}, outside
    # The check's, and git's reading and filling the checkout; the rest ran in the clone.
    assert executor.cwds.count(Path(checkout)) == 4
    assert not Path(checkout).exists()
    assert report["verified_commit"] == git.Repo(rec.clone_dir).head.commit.hexsha


def report_diff(report: dict[str, object]) -> tuple[str, ...]:
    return (
        "git", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
        str(report["head_before"]), "HEAD",
    )  # fmt: skip


@pytest.mark.slow
def test_a_red_mechanical_fix_keeps_its_result_restores_and_falls_back(tmp_path: Path) -> None:
    rec = record(tmp_path)
    repo = make_clone(rec)
    before = repo.head.commit.hexsha
    red = MECH.model_copy(
        update={
            "repair_plan": RepairPlan(
                verification_check="lint",
                commands=("git checkout fix-branch -- other", "git commit -m wrong"),
            )
        }
    )
    svc = services(tmp_path)
    after, effect = mechanical_fix.apply(
        rec, applying(red), mechanical_fix.plan(red, facts(rec)), svc
    )
    assert effect.resume_at == "implement"
    assert after.stage_status("implement") is StageStatus.PENDING
    assert effect.outcome.startswith("mechanical-fix red (verification check 'lint' still fails")
    assert repo.head.commit.hexsha == before and not (Path(rec.clone_dir) / "other").exists()
    kept = repo.commit(f"refs/orchestrator/{rec.run_id}/recipe-1")
    assert kept.message.strip() == "wrong"
    report = json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id, 1).read_text())
    assert (report["status"], report["restored"], report["head_before"]) == ("red", True, before)


@pytest.mark.slow
def test_two_mechanical_fixes_in_one_run_keep_both_reports(tmp_path: Path) -> None:
    rec = record(tmp_path)
    make_clone(rec)
    svc = services(tmp_path)
    refused = MECH.model_copy(
        update={"repair_plan": RepairPlan(verification_check="lint", commands=("rm x",))}
    )
    mechanical_fix.apply(rec, applying(refused, 1), mechanical_fix.plan(refused, facts(rec)), svc)
    mechanical_fix.apply(rec, applying(MECH, 2), mechanical_fix.plan(MECH, facts(rec)), svc)
    first = json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id, 1).read_text())
    second = json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id, 2).read_text())
    assert (first["verdict"], first["status"]) == (1, "red")
    assert (second["verdict"], second["status"]) == (2, "green")
    # The older one-per-run name still holds the latest.
    assert json.loads(svc.storage.runs.mechanical_fix_path(rec.run_id).read_text()) == second


# ---- the dispatcher ----------------------------------------------------------------------


def test_an_infra_retry_returns_its_back_off_and_is_charged_once(tmp_path: Path) -> None:
    rec = record(tmp_path)
    now = [NOW]
    # Its sleep fails the test: the substrate must not wait.
    svc = dataclasses.replace(services(tmp_path), clock=lambda: now[0])
    retry = RetryVerdict(action="retry", summary="rate limited")
    infra = proposal(retry, infra="rate_limited")
    _, effect = substrate.apply(rec, infra, approval(1), svc)
    # The check named the rate limit: the check's stage is re-run, not the engine's.
    assert (effect.resume_at, effect.retry_after_s) == ("review", 30.0)
    # Carried out again 10 s later (a crash before the run was saved): no second charge,
    # and only what is left of the wait.
    now[0] = NOW + timedelta(seconds=10)
    _, again = substrate.apply(rec, infra, approval(1), svc)
    assert again.retry_after_s == 20.0
    assert BudgetStore(svc.storage.runs.state_dir).load("T-1").spent("infra-retry") == 1
    # The next infra retry waits twice as long.
    _, second = substrate.apply(rec, infra, approval(2), svc)
    assert second.retry_after_s == 60.0


def test_an_infra_retry_re_runs_the_failing_stage_a_code_retry_the_engines(
    tmp_path: Path,
) -> None:
    rec = record(tmp_path)
    svc = services(tmp_path)
    retry = RetryVerdict(action="retry", summary="again")
    # A check that hit the network: the review stage again, the code untouched.
    network = proposal(retry, stage="review", check="lint", infra="network")
    after, effect = substrate.apply(rec, network, approval(1), svc)
    assert effect.resume_at == "review"
    assert after.stage_status("implement") is StageStatus.COMPLETED
    # The engine stage itself rate limited: it is the one re-run.
    engine = proposal(retry, stage="implement", check=None, infra="rate_limited")
    _, effect = substrate.apply(rec, engine, approval(2), svc)
    assert effect.resume_at == "implement"
    # The code failed a check: the engine stage that wrote it is re-run.
    code = proposal(retry, stage="review", check="lint")
    after, effect = substrate.apply(rec, code, approval(3), svc)
    assert effect.resume_at == "implement"
    assert after.stage_status("implement") is StageStatus.PENDING


def test_a_spent_retry_budget_hands_the_ticket_to_a_person(tmp_path: Path) -> None:
    rec = record(tmp_path)
    svc = services(tmp_path)
    retry = RetryVerdict(action="retry", summary="flaky")
    after, effect = substrate.apply(rec, proposal(retry), approval(1), svc)
    assert effect.resume_at == "implement" and effect.retry_after_s is None
    assert after.counters.retries == 1
    _, spent = substrate.apply(rec, proposal(retry), approval(2), svc)
    assert spent.terminal is RunState.NEEDS_HUMAN and spent.halt is not None
    assert spent.halt.reason is HaltReason.CAP_EXHAUSTED
    assert spent.halt.detail.startswith(
        "retry cap spent (1/1 for this ticket); the verdict was retry; hand-off: "
    )


def test_a_rejected_approval_stops_without_running_anything(tmp_path: Path) -> None:
    rec = record(tmp_path)
    executor = RecordingExecutor()
    svc = services(tmp_path, executor)
    _, effect = substrate.apply(rec, proposal(MECH), approval(1, approved=False), svc)
    assert effect.terminal is RunState.NEEDS_HUMAN and effect.halt is not None
    assert effect.halt.reason is HaltReason.HUMAN_REJECTED
    assert executor.started == []


@pytest.mark.slow
def test_show_finds_each_verdicts_report_and_an_older_state_dirs_one(tmp_path: Path) -> None:
    from orchestrator.cli.commands.show import show
    from orchestrator.domain.runs import VerdictRef

    rec = record(tmp_path)
    make_clone(rec)
    svc = services(tmp_path)
    refused = MECH.model_copy(
        update={"repair_plan": RepairPlan(verification_check="lint", commands=("rm x",))}
    )
    mechanical_fix.apply(rec, applying(refused, 1), mechanical_fix.plan(refused, facts(rec)), svc)
    mechanical_fix.apply(rec, applying(MECH, 2), mechanical_fix.plan(MECH, facts(rec)), svc)
    refs = tuple(
        VerdictRef(
            number=n,
            attempt=n,
            source="model",
            action="mechanical-fix",
            path=str(svc.storage.runs.verdict_path(rec.run_id, n)),
            outcome="done",
        )
        for n in (1, 2)
    )
    svc.storage.runs.save(rec.model_copy(update={"verdicts": refs}))
    out = io.StringIO()
    assert show(svc.storage.runs.state_dir, rec.run_id, out) == 0
    text = out.getvalue()
    assert "recipe refused or failed: " in text  # verdict 1's own report
    assert "recipe: git checkout fix-branch -- fixed → exit 0" in text  # verdict 2's
    # A state dir from before numbered reports: the one-per-run file is still read.
    for n in (1, 2):
        svc.storage.runs.mechanical_fix_path(rec.run_id, n).unlink()
    out = io.StringIO()
    assert show(svc.storage.runs.state_dir, rec.run_id, out) == 0
    assert "recipe: git checkout fix-branch -- fixed → exit 0" in out.getvalue()
    assert "recipe refused or failed" not in out.getvalue()


def test_the_retry_charge_decision_is_pure_and_keyed_per_verdict() -> None:
    from orchestrator.actions.budget import backoff_s, decide_charge
    from orchestrator.storage.budget import Charge, TicketBudget

    recovery = config().recovery
    empty = TicketBudget(ticket_id="T-1")
    assert decide_charge(empty, key="r:verdict-1", infra=False, recovery=recovery, now=NOW) == (
        budget.RetryCharge("retry", "r:verdict-1", granted=True)
    )
    infra = decide_charge(empty, key="r:verdict-1", infra=True, recovery=recovery, now=NOW)
    assert (infra.kind, infra.retry_after_s) == ("infra-retry", 30.0)
    spent = TicketBudget(
        ticket_id="T-1",
        charges=(Charge(kind="retry", key="r:verdict-1", run_id="r", at=NOW),),
    )
    # Its own charge found again: granted, nothing more to pay; another verdict: refused.
    assert decide_charge(spent, key="r:verdict-1", infra=False, recovery=recovery, now=NOW).granted
    refused = decide_charge(spent, key="r:verdict-2", infra=False, recovery=recovery, now=NOW)
    assert (refused.granted, refused.refusal) == (False, "retry cap spent (1/1 for this ticket)")
    assert [backoff_s(30.0, n) for n in range(7)] == [30, 60, 120, 240, 480, 600, 600]


def test_the_back_off_owed_is_measured_from_the_persisted_charge() -> None:
    from orchestrator.actions.budget import back_off_owed
    from orchestrator.storage.budget import Charge, TicketBudget

    recovery = config().recovery  # 30 s, doubling
    charges = tuple(
        Charge(kind=kind, key=f"r:verdict-{n}", run_id="r", at=NOW)
        for n, kind in enumerate(["infra-retry", "retry", "infra-retry"], start=1)
    )
    ticket = TicketBudget(ticket_id="T-1", charges=charges)

    def owed(key: str, after_s: float) -> float | None:
        return back_off_owed(
            ticket, key=key, recovery=recovery, now=NOW + timedelta(seconds=after_s)
        )

    assert owed("r:verdict-1", 10) == 20.0
    assert owed("r:verdict-3", 10) == 50.0  # the second infra retry: 60 s
    assert owed("r:verdict-3", 60) is None  # waited in full
    assert owed("r:verdict-2", 0) is None  # a plain retry owes nothing
    assert owed("r:verdict-9", 0) is None  # never charged
