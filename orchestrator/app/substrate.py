"""The only mutator: carries out a validated, persisted decision. A plain dispatcher —
one branch per action, no model, no judgement.

    retry            re-run the stage that produced the code (then everything after it)
    escalate-model   the same, with the next model in that stage's engine ladder
    switch-engine    the same, with the named engine (its first model)
    split            write the sub-tickets beside the parent; the parent ends ``split``
    abandon-human    write a hand-off file; the ticket ends ``needs-human``
    mechanical-fix   run the recipe in the clone, then the ORIGINAL failing check from
                     config; green → continue from the failed stage; a failing command,
                     a red check, or an edit to the check's own files → keep the evidence
                     and fall back to a plain retry. Recipe plus fallback: one retry charge.

Retry-like actions are charged against ``max_retries_per_ticket`` before they run; a
spent budget ends the ticket ``needs-human`` with ``cap_exhausted``.

``apply`` accepts a Proposal and an Approval and nothing else: what to do, and that it
may be done. Which stage failed, which check, which halt reason — all come from the
proposal's evidence and the trusted config, never from anywhere the model could write.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.domain.config import Config, StageConfig
from orchestrator.domain.errors import StateError
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.execution import runner
from orchestrator.execution.attempts import Services, engine_and_model, run_check, stage_context
from orchestrator.execution.stage_env import stage_environ
from orchestrator.recovery.proposal import Proposal
from orchestrator.recovery.recipe import plan_recipe
from orchestrator.recovery.verdict import (
    AbandonHumanVerdict,
    EscalateModelVerdict,
    MechanicalFixVerdict,
    RetryVerdict,
    SplitVerdict,
    SwitchEngineVerdict,
    Verdict,
    abandon,
    next_model,
)
from orchestrator.storage.approvals import Approval
from orchestrator.storage.atomic import atomic_write
from orchestrator.storage.budget import BudgetStore, ChargeKind
from orchestrator.storage.runs import Halt, RunRecord, StageOverride


@dataclass(frozen=True)
class Effect:
    """What the pipeline does next: continue from a stage, or stop in a terminal state."""

    outcome: str  # one line for the run record and the ledger
    paused: bool = False  # waiting for a person to approve or reject
    resume_at: str | None = None
    terminal: RunState | None = None
    halt: Halt | None = None


@dataclass(frozen=True)
class Applying:
    """The decision being carried out: its proposal, its approval, its verdict's words (for
    the hand-off) and the failed stage. What to *do* is the plan (``plan_dispatch``)."""

    proposal: Proposal
    approval: Approval
    verdict: Verdict  # as carried out (a rejected proposal's becomes abandon-human)
    failing_stage: StageConfig

    @property
    def number(self) -> int:
        return self.approval.verdict

    @property
    def source(self) -> str:
        return self.proposal.evidence.source.source.value

    @property
    def reason(self) -> str:
        return self.proposal.reasoning[0] if self.proposal.reasoning else ""


MAX_BACKOFF_S = 600.0


def backoff_s(base: float, retries_so_far: int) -> float:
    """Doubling back-off for infrastructure retries, capped at ten minutes."""
    return float(min(base * 2**retries_so_far, MAX_BACKOFF_S))


def code_stage_for(config: Config, failing: StageConfig) -> StageConfig:
    """The stage whose output a retry must redo: a failed check re-runs the nearest
    engine stage before it; any other stage re-runs itself."""
    if not failing.is_check_stage:
        return failing
    names = [s.name for s in config.stages]
    for stage in reversed(config.stages[: names.index(failing.name)]):
        if stage.engine is not None:
            return stage
    return failing


def _applying(proposal: Proposal, approval: Approval, config: Config) -> Applying:
    if approval.decision_id != proposal.decision_id:
        raise StateError(
            f"state error: approval for {approval.decision_id} does not answer {proposal.decision_id}"
        )
    verdict: Verdict = proposal.action
    failing = config.stage(proposal.evidence.failure.stage)
    if proposal.routing == "reject" and not isinstance(verdict, AbandonHumanVerdict):
        # Defence in depth: a rejected proposal never runs; a person gets the ticket.
        verdict = abandon(
            f"proposal rejected: {proposal.reasoning[0] if proposal.reasoning else ''}"
        )
    return Applying(
        proposal=proposal,
        approval=approval,
        verdict=verdict,
        failing_stage=failing,
    )


@dataclass(frozen=True)
class Dispatch:
    """What the substrate would do with a proposal — stated, never done."""

    action: str  # what would be carried out (a rejected proposal becomes abandon-human)
    approval: str  # "auto": carried out at once; "person": waits for approve/reject
    rerun: str | None = None  # the stage re-run; for mechanical-fix, resumed at when green
    fallback: str | None = None  # mechanical-fix: the stage a red recipe's retry re-runs
    engine: str | None = None  # escalate-model / switch-engine: the override
    model: str | None = None
    recipe: tuple[tuple[str, ...], ...] = ()  # the argv lists, as plan_recipe makes them
    recipe_errors: tuple[str, ...] = ()
    verify_check: str | None = None
    terminal: str | None = None  # the run state it ends in, for the terminal actions
    halt: str | None = None
    sub_tickets: tuple[str, ...] = ()
    error: str | None = None  # the substrate would refuse it (a StateError there)

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "approval": self.approval,
            "rerun": self.rerun,
            "fallback": self.fallback,
            "engine": self.engine,
            "model": self.model,
            "recipe": [list(argv) for argv in self.recipe],
            "recipe_errors": list(self.recipe_errors),
            "verify_check": self.verify_check,
            "terminal": self.terminal,
            "halt": self.halt,
            "sub_tickets": list(self.sub_tickets),
            "error": self.error,
        }

    def describe(self) -> str:
        if self.error is not None:
            return f"refused: {self.error}"
        if self.terminal is not None:
            what = (
                f"split into {len(self.sub_tickets)} sub-tickets"
                if self.terminal == RunState.SPLIT
                else f"{self.terminal} ({self.halt})"
            )
        elif self.action == "mechanical-fix":
            what = (
                f"recipe refused → re-run {self.fallback}"
                if self.recipe_errors
                else f"recipe of {len(self.recipe)} command(s), verified by {self.verify_check}: "
                f"green → resume at {self.rerun}, red → re-run {self.fallback}"
            )
        elif self.engine is not None:
            what = f"re-run {self.rerun} with {self.engine}/{self.model or '-'}"
        else:
            what = f"re-run {self.rerun}"
        return what if self.approval == "auto" else f"{what}, once a person approves"


def plan_dispatch(proposal: Proposal, config: Config, record: RunRecord) -> Dispatch:
    """What ``apply`` does with ``proposal`` once approved, stated as data and doing none
    of it: ``apply`` carries out exactly this plan, and replay compares it. Derived from
    the proposal's evidence and the trusted config only. ``record`` is the run as it stood at the decision (its
    overrides give the engine and model an escalation starts from). The retry budget is
    the ticket's spend state, not part of the decision, and is not considered."""
    approval = "auto" if proposal.routing in ("auto", "reject") else "person"
    verdict: Verdict = proposal.action
    failure = proposal.evidence.failure
    halt = proposal.evidence.halt
    try:
        failing = config.stage(failure.stage)
    except KeyError:
        return Dispatch(
            verdict.action, approval,
            error=f"stage {failure.stage!r} is not in today's config",
        )  # fmt: skip
    if proposal.routing == "reject" and not isinstance(verdict, AbandonHumanVerdict):
        verdict = abandon("proposal rejected")  # as the substrate does: never run
    code = code_stage_for(config, failing)
    if isinstance(verdict, AbandonHumanVerdict):
        if halt.cap_exhausted:
            return Dispatch(
                verdict.action, approval, terminal=RunState.FAILED.value,
                halt=HaltReason.CAP_EXHAUSTED.value,
            )  # fmt: skip
        reason = (halt.reason or HaltReason.ABANDONED).value
        return Dispatch(verdict.action, approval, terminal=RunState.NEEDS_HUMAN.value, halt=reason)
    if isinstance(verdict, SplitVerdict):
        return Dispatch(
            verdict.action, approval, terminal=RunState.SPLIT.value,
            sub_tickets=tuple(s.title for s in verdict.sub_tickets),
        )  # fmt: skip
    if isinstance(verdict, RetryVerdict):
        return Dispatch(verdict.action, approval, rerun=code.name)
    if isinstance(verdict, EscalateModelVerdict):
        engine, model = engine_and_model(record, code, config)
        if engine not in config.engines:
            return Dispatch(verdict.action, approval, error=f"engine {engine!r} is not configured")
        stronger = next_model(config.engines[engine].models, model or None)
        return Dispatch(verdict.action, approval, rerun=code.name, engine=engine, model=stronger)
    if isinstance(verdict, SwitchEngineVerdict):
        if verdict.engine not in config.engines:
            return Dispatch(
                verdict.action, approval, error=f"engine {verdict.engine!r} is not configured"
            )
        ladder = config.engines[verdict.engine].models
        return Dispatch(
            verdict.action, approval, rerun=code.name, engine=verdict.engine,
            model=ladder[0] if ladder else None,
        )  # fmt: skip
    assert isinstance(verdict, MechanicalFixVerdict)
    argvs, recipe_errors = plan_recipe(
        verdict.repair_plan.commands,
        clone_dir=Path(record.clone_dir),
        allowlist=config.recovery.recipe_allowlist,
    )
    return Dispatch(
        verdict.action, approval, rerun=failing.name, fallback=code.name,
        recipe=tuple(argvs), recipe_errors=tuple(recipe_errors),
        verify_check=failure.check,
    )  # fmt: skip


def apply(
    record: RunRecord, proposal: Proposal, approval: Approval, services: Services
) -> tuple[RunRecord, Effect]:
    """Carry out ``proposal``, which ``approval`` approved. Nothing else gets in."""
    applying = _applying(proposal, approval, services.loaded.config)
    if not approval.approved:
        return _stop(
            record, applying, services, RunState.NEEDS_HUMAN, HaltReason.HUMAN_REJECTED,
            why=f"rejected by {approval.by}: {approval.reason or 'no reason given'}",
        )  # fmt: skip
    config = services.loaded.config
    plan = plan_dispatch(proposal, config, record)
    if plan.error is not None:
        raise StateError(
            f"state error: proposal {proposal.decision_id} cannot be carried out: {plan.error}"
        )
    verdict = applying.verdict
    if plan.terminal == RunState.SPLIT:
        assert isinstance(verdict, SplitVerdict)
        return _split(record, applying, verdict, services)
    if plan.terminal is not None:
        assert plan.halt is not None  # every terminal plan but split names its halt
        return _stop(record, applying, services, RunState(plan.terminal), HaltReason(plan.halt))

    budgets = BudgetStore(services.store.state_dir)
    key = f"{record.run_id}:verdict-{applying.number}"
    budget = budgets.load(record.ticket_id)
    infra = applying.proposal.evidence.failure.infra
    # Infrastructure retries have their own budget, and wait before they go again.
    kind: ChargeKind = "infra-retry" if infra else "retry"
    limit = (
        config.recovery.max_infra_retries_per_ticket
        if infra
        else config.recovery.max_retries_per_ticket
    )
    if not budget.has(kind, key) and budget.spent(kind) >= limit:
        return _stop(
            record, applying, services, RunState.NEEDS_HUMAN, HaltReason.CAP_EXHAUSTED,
            why=f"{kind} cap spent ({budget.spent(kind)}/{limit} for this ticket); "
            f"the verdict was {verdict.action}",
        )  # fmt: skip
    if infra and not budget.has(kind, key):
        delay = backoff_s(config.recovery.infra_backoff_s, budget.spent(kind))
        services.reporter.note(f"{infra}: waiting {delay:.0f}s before the retry")
        services.sleep(delay)
    budgets.charge(record.ticket_id, kind, key, run_id=record.run_id, at=services.clock())
    record = record.model_copy(
        update={
            "counters": record.counters.model_copy(update={"retries": record.counters.retries + 1})
        }
    )
    if isinstance(verdict, MechanicalFixVerdict):
        return _mechanical_fix(record, applying, plan, services)
    assert plan.rerun is not None
    if plan.engine is not None:
        record = _override(record, plan.rerun, StageOverride(engine=plan.engine, model=plan.model))
    if isinstance(verdict, EscalateModelVerdict):
        outcome = f"escalate-model: re-running {plan.rerun} with {plan.engine}/{plan.model}"
    elif isinstance(verdict, SwitchEngineVerdict):
        outcome = f"switch-engine: re-running {plan.rerun} with {plan.engine}"
    else:
        outcome = f"retry: re-running {plan.rerun}"
    return _rerun(record, plan.rerun, outcome)


def _override(record: RunRecord, stage: str, override: StageOverride) -> RunRecord:
    return record.model_copy(update={"overrides": {**record.overrides, stage: override}})


def _rerun(record: RunRecord, stage: str, outcome: str) -> tuple[RunRecord, Effect]:
    return record.reset_stages_from(stage), Effect(outcome=outcome, resume_at=stage)


def _stop(
    record: RunRecord,
    applying: Applying,
    services: Services,
    state: RunState,
    reason: HaltReason,
    *,
    why: str | None = None,
) -> tuple[RunRecord, Effect]:
    # A synthetic or replaced verdict's summary is the reason; a real one's is its words.
    detail = why or f"{applying.source} verdict {applying.number}: {applying.verdict.summary}"
    handoff = write_handoff(record, applying, detail, services)
    record = record.model_copy(update={"handoff": str(handoff)})
    halt = Halt(
        reason=reason, stage=applying.failing_stage.name, detail=f"{detail}; hand-off: {handoff}"
    )
    return record, Effect(outcome=f"{state}: {reason}", terminal=state, halt=halt)


def write_handoff(record: RunRecord, applying: Applying, why: str, services: Services) -> Path:
    """What a human needs: what failed, what was tried, where the evidence is."""
    store = services.store
    path = store.handoff_path(record.run_id)
    failed = record.last_failed_attempt()
    lines = [
        f"# Hand-off: {record.ticket_id} — {record.ticket_title}",
        "",
        f"Run `{record.run_id}` stopped and needs a human.",
        "",
        f"**Why:** {why}",
        "",
        "## What failed",
    ]
    if failed is not None:
        check = failed.failing_check
        lines.append(
            f"- stage `{failed.stage}` (attempt {failed.number}): "
            + (
                f"check `{check.name}` exited {check.exit_code}"
                if check
                else f"exit {failed.exit_code}"
            )
            + (" (timed out)" if failed.timed_out else "")
        )
        lines.append(f"- log: `{failed.log_path}`")
    lines += ["", "## What was tried"]
    for attempt in record.attempts:
        lines.append(
            f"- attempt {attempt.number}: `{attempt.stage}` "
            f"{'engine ' + attempt.engine + ' ' if attempt.engine else ''}"
            f"{'model ' + attempt.model + ' ' if attempt.model else ''}→ {attempt.status}, exit {attempt.exit_code}"
        )
    for ref in record.verdicts:
        if ref.number != applying.number:
            lines.append(f"- verdict {ref.number} ({ref.source}): `{ref.action}` → {ref.outcome}")
    lines.append(
        f"- verdict {applying.number} ({applying.source}): `{applying.proposal.action.action}`"
        f" — {applying.reason}"
    )
    lines += [
        "",
        "## Evidence",
        f"- run record: `{store.record_path(record.run_id)}`",
        f"- verdict: `{store.verdict_path(record.run_id, applying.number)}`",
        f"- context bundle: `{applying.proposal.evidence.bundle.path or 'none'}`",
        f"- logs: `{Path(record.run_dir) / 'logs'}`",
        f"- clone: `{record.clone_dir}`",
        f"- ticket: `{record.ticket_snapshot}`",
        "",
    ]
    atomic_write(path, "\n".join(lines).encode())
    return path


def _split(
    record: RunRecord, applying: Applying, verdict: SplitVerdict, services: Services
) -> tuple[RunRecord, Effect]:
    """Write each sub-ticket as a ticket file beside the parent, linked by ``parent``."""
    parent = Path(record.ticket_path)
    written = []
    for index, sub in enumerate(verdict.sub_tickets, start=1):
        sub_id = f"{record.ticket_id}.{index}"
        path = parent.parent / f"{sub_id}.md"
        text = (
            "+++\n"
            f"id = {json.dumps(sub_id)}\n"
            f"title = {json.dumps(sub.title)}\n"
            f"kind = {json.dumps(record.ticket_kind)}\n"
            f"repository = {json.dumps(record.repository)}\n"
            f"base_branch = {json.dumps(record.base_branch)}\n"
            f"parent = {json.dumps(record.ticket_id)}\n"
            "+++\n"
            f"{sub.body}\n\n"
            f"(Split from {record.ticket_id} by run {record.run_id}, verdict "
            f"{applying.number}: {verdict.summary})\n"
        )
        # A redelivered split finds its own files and leaves them; it never clobbers others.
        if not path.exists() or path.read_text() != text:
            if path.exists():
                path = parent.parent / f"{sub_id}.{record.run_id}.md"
            atomic_write(path, text.encode())
        written.append(str(path))
    record = record.model_copy(update={"sub_tickets": tuple(written)})
    return record, Effect(outcome=f"split into {len(written)} sub-tickets", terminal=RunState.SPLIT)


def _file_digests(paths: list[Path]) -> dict[str, str]:
    out = {}
    for path in paths:
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "missing"
    return out


def check_files(argv: tuple[str, ...], clone: Path) -> list[Path]:
    """The files inside the clone a check's command names (its script, its config): a
    recipe that edits them has weakened the verifier, so its green does not count."""
    found = []
    for arg in argv[1:] + argv[:1]:
        candidate = Path(arg) if Path(arg).is_absolute() else clone / arg
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_file() and resolved.is_relative_to(clone.resolve()):
            found.append(resolved)
    return found


def _keep_and_restore(
    record: RunRecord,
    number: int,
    pre_recipe: str | None,
    logs: Path,
    env: dict[str, str],
    services: Services,
) -> tuple[str | None, bool]:
    """A red recipe's result is kept as a ref for inspection, then the clone goes back
    to where it was before the recipe: the fallback retry must not build on top of it
    (nor on a check the recipe weakened)."""
    clone = Path(record.clone_dir)
    ref = f"refs/orchestrator/{record.run_id}/recipe-{number}"
    steps: list[tuple[str, ...]] = [("git", "update-ref", ref, "HEAD")]
    if pre_recipe is not None:
        steps += [("git", "reset", "--hard", pre_recipe), ("git", "clean", "-fd")]
    ok = True
    for index, argv in enumerate(steps, start=1):
        outcome = services.run_process(
            argv,
            cwd=clone,
            env=env,
            log_path=logs / f"verdict-{number}-restore-{index}.log",
            timeout_s=60.0,
            kill_after_s=5.0,
        )
        ok = ok and outcome.ok
    return ref, ok and pre_recipe is not None


def _mechanical_fix(
    record: RunRecord, applying: Applying, plan: Dispatch, services: Services
) -> tuple[RunRecord, Effect]:
    """Run the plan's recipe, verify with the plan's check; green → resume at the plan's
    stage, red → keep the result, restore the clone, re-run the plan's fallback."""
    verdict = applying.verdict
    assert isinstance(verdict, MechanicalFixVerdict)
    assert plan.rerun is not None and plan.fallback is not None
    config = services.loaded.config
    store = services.store
    clone = Path(record.clone_dir)
    stage = applying.failing_stage
    check = next(c for c in stage.checks if c.name == plan.verify_check)
    argvs, errors = list(plan.recipe), list(plan.recipe_errors)
    fix_path = store.mechanical_fix_path(record.run_id)
    report: dict[str, Any] = {
        "run_id": record.run_id,
        "verdict": applying.number,
        "source": applying.source,
        "summary": verdict.summary,
        "repair_plan": verdict.repair_plan.model_dump(),
        "argv": [list(a) for a in argvs],
        "verifier": {"check": check.name, "command": list(check.command)},
        "commands": [],
        "status": "running",
    }
    atomic_write(fix_path, json.dumps(report, indent=2).encode())  # the plan, before it runs

    n = applying.number
    logs = Path(record.run_dir) / "logs"
    ctx = stage_context(record, stage.name, "", "", record.counters.attempts, store)
    env = stage_environ(services.environ, ctx)
    red_reason = "; ".join(errors) if errors else None
    guarded = check_files(check.command, clone)
    before = _file_digests(guarded)
    head = runner.capture_head(
        ("git", "rev-parse", "HEAD"), cwd=clone, env=env, max_bytes=100, timeout_s=30
    )
    pre_recipe = head.data.decode().strip() if head.exit_code == 0 else None
    report["head_before"] = pre_recipe
    for index, argv in enumerate(argvs if not errors else []):
        services.reporter.note(f"recipe {index + 1}/{len(argvs)}: {shlex.join(argv)}")
        outcome = services.run_process(
            argv,
            cwd=clone,
            env=env,
            log_path=logs / f"verdict-{n}-recipe-{index + 1}.log",
            timeout_s=config.recovery.recipe_command_timeout_s,
            kill_after_s=stage.kill_after_s,
        )
        report["commands"].append(
            {"argv": list(argv), "exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
             "log_path": str(outcome.log_path), "error": outcome.error}
        )  # fmt: skip
        if not outcome.ok:
            red_reason = f"recipe command {index + 1} {'timed out' if outcome.timed_out else f'exited {outcome.exit_code}'}"
            break
    if red_reason is None:
        result = run_check(check, stage, ctx, Path(record.clone_dir) if stage.cwd == "clone" else Path(record.run_dir),
                           logs / f"verdict-{n}-verify-{check.name}.log", services)  # fmt: skip
        report["verification"] = result.model_dump(mode="json")
        changed = [p for p, digest in _file_digests(guarded).items() if before.get(p) != digest]
        if changed:
            red_reason = f"the recipe changed the check's own files: {changed}"
        elif not result.passed:
            red_reason = f"verification check {check.name!r} still fails (exit {result.exit_code})"
    report["status"] = "green" if red_reason is None else "red"
    report["red_reason"] = red_reason
    atomic_write(fix_path, json.dumps(report, indent=2).encode())
    if red_reason is None:
        services.reporter.note(f"mechanical fix verified: {check.name} is green")
        return record.reset_stages_from(plan.rerun), Effect(
            outcome=f"mechanical-fix green: {check.name} passes", resume_at=plan.rerun
        )
    services.reporter.note(f"mechanical fix red ({red_reason}); falling back to a retry")
    report["kept_as"], report["restored"] = _keep_and_restore(
        record, n, pre_recipe, logs, env, services
    )
    atomic_write(fix_path, json.dumps(report, indent=2).encode())
    fallback = plan.fallback
    return _rerun(
        record, fallback, f"mechanical-fix red ({red_reason}); fell back to retry of {fallback}"
    )
