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

from orchestrator import runner
from orchestrator.approvals import Approval
from orchestrator.atomic import atomic_write
from orchestrator.attempts import Services, engine_and_model, run_check, stage_context
from orchestrator.budget import BudgetStore, ChargeKind
from orchestrator.config import Config, StageConfig
from orchestrator.errors import StateError
from orchestrator.pipeline import HaltReason, RunState
from orchestrator.recovery.graph import Proposal
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
    validate_verdict_object,
)
from orchestrator.stage_env import stage_environ
from orchestrator.state import Halt, RunRecord, StageOverride


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
    """The facts the substrate works from, all derived from the Proposal and trusted config."""

    proposal: Proposal
    approval: Approval
    verdict: Verdict
    failing_stage: StageConfig
    code_stage: StageConfig
    failing_check: str | None
    halt_reason: HaltReason | None
    cap_exhausted: bool

    @property
    def number(self) -> int:
        return self.approval.verdict

    @property
    def source(self) -> str:
        return str(self.proposal.evidence_of("source").get("source", "?"))

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
    verdict, errors = validate_verdict_object(proposal.action)
    if verdict is None:
        raise StateError(f"state error: proposal {proposal.decision_id} is not a verdict: {errors}")
    failure = proposal.evidence_of("failure")
    halt = proposal.evidence_of("halt")
    failing = config.stage(str(failure["stage"]))
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
        code_stage=code_stage_for(config, failing),
        failing_check=failure.get("check"),
        halt_reason=HaltReason(halt["reason"]) if halt.get("reason") else None,
        cap_exhausted=bool(halt.get("cap_exhausted")),
    )


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
    verdict = applying.verdict
    if isinstance(verdict, AbandonHumanVerdict):
        if applying.cap_exhausted:
            return _stop(record, applying, services, RunState.FAILED, HaltReason.CAP_EXHAUSTED)
        return _stop(
            record, applying, services, RunState.NEEDS_HUMAN,
            applying.halt_reason or HaltReason.ABANDONED,
        )  # fmt: skip
    if isinstance(verdict, SplitVerdict):
        return _split(record, applying, verdict, services)

    config = services.loaded.config
    budgets = BudgetStore(services.store.state_dir)
    key = f"{record.run_id}:verdict-{applying.number}"
    budget = budgets.load(record.ticket_id)
    infra = applying.proposal.evidence_of("failure").get("infra")
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
    code = applying.code_stage.name

    if isinstance(verdict, RetryVerdict):
        return _rerun(record, code, f"retry: re-running {code}")
    if isinstance(verdict, EscalateModelVerdict):
        engine, model = engine_and_model(record, applying.code_stage, config)
        stronger = next_model(config.engines[engine].models, model or None)
        record = _override(record, code, StageOverride(engine=engine, model=stronger))
        return _rerun(record, code, f"escalate-model: re-running {code} with {engine}/{stronger}")
    if isinstance(verdict, SwitchEngineVerdict):
        ladder = config.engines[verdict.engine].models
        record = _override(
            record, code, StageOverride(engine=verdict.engine, model=ladder[0] if ladder else None)
        )
        return _rerun(record, code, f"switch-engine: re-running {code} with {verdict.engine}")
    assert isinstance(verdict, MechanicalFixVerdict)
    return _mechanical_fix(record, applying, verdict, services)


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
        f"- verdict {applying.number} ({applying.source}): `{applying.proposal.action['action']}`"
        f" — {applying.reason}"
    )
    lines += [
        "",
        "## Evidence",
        f"- run record: `{store.record_path(record.run_id)}`",
        f"- verdict: `{store.verdict_path(record.run_id, applying.number)}`",
        f"- context bundle: `{applying.proposal.evidence_of('bundle').get('path') or 'none'}`",
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
    record: RunRecord, applying: Applying, verdict: MechanicalFixVerdict, services: Services
) -> tuple[RunRecord, Effect]:
    config = services.loaded.config
    store = services.store
    clone = Path(record.clone_dir)
    stage = applying.failing_stage
    check = next(c for c in stage.checks if c.name == applying.failing_check)
    argvs, errors = plan_recipe(
        verdict.repair_plan.commands, clone_dir=clone, allowlist=config.recovery.recipe_allowlist
    )
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
        return record.reset_stages_from(stage.name), Effect(
            outcome=f"mechanical-fix green: {check.name} passes", resume_at=stage.name
        )
    services.reporter.note(f"mechanical fix red ({red_reason}); falling back to a retry")
    report["kept_as"], report["restored"] = _keep_and_restore(
        record, n, pre_recipe, logs, env, services
    )
    atomic_write(fix_path, json.dumps(report, indent=2).encode())
    code = applying.code_stage.name
    return _rerun(record, code, f"mechanical-fix red ({red_reason}); fell back to retry of {code}")
