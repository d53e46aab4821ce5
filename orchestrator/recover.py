"""What happens when an attempt fails: one decision, persisted, then carried out.

    gather facts ─► bundle (persisted) ─► decide (recovery.diagnose: the sandwich)
                 ─► verdict file (persisted) ─► substrate.apply ─► outcome on the run record

The run sits in ``recovering`` throughout. If the orchestrator dies here, resuming finds
the decision already persisted for that attempt and carries it out without asking again;
if none was persisted, it decides again (a diagnosis charged before the crash stays spent).
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator import runner
from orchestrator.atomic import atomic_write
from orchestrator.attempts import Services, engine_and_model
from orchestrator.budget import BudgetStore
from orchestrator.config import Config, StageConfig
from orchestrator.errors import StateError
from orchestrator.pipeline import HaltReason, RunState
from orchestrator.recovery.context import (
    REDACTION_MARGIN_BYTES,
    BundleInputs,
    build_bundle,
    tail_bytes,
)
from orchestrator.recovery.diagnose import Caps, Decision, decide
from orchestrator.recovery.playbook import Failure
from orchestrator.recovery.prompt import PROMPT_VERSION, PromptFacts
from orchestrator.recovery.verdict import DecisionContext, validate_verdict_object
from orchestrator.state import Attempt, RunRecord, VerdictRef
from orchestrator.substrate import Applying, Effect, apply
from orchestrator.verdicts import TokenUsage, VerdictRecord, read_verdict, write_verdict

DIFF_TIMEOUT_S = 60.0


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


def _clone_exists(record: RunRecord) -> bool:
    return (Path(record.clone_dir) / ".git").exists()


def _read_diff(record: RunRecord, services: Services, max_bytes: int) -> runner.CapturedHead:
    # Read through the runner (the one place processes start), capped: a 100 MB diff costs
    # what the cap costs. Three dots: the branch's own changes since it left its base.
    return runner.capture_head(
        ("git", "diff", "--no-color", "--no-ext-diff", f"origin/{record.base_branch}...HEAD"),
        cwd=Path(record.clone_dir),
        env={k: v for k, v in services.environ.items() if k in ("PATH", "HOME", "LANG")},
        max_bytes=max_bytes,
        timeout_s=DIFF_TIMEOUT_S,
    )


def _bundle_inputs(
    record: RunRecord, attempt: Attempt, services: Services, clone_exists: bool
) -> BundleInputs:
    limits = services.loaded.config.recovery.context
    state = {
        "run_id": record.run_id,
        "state": record.state,
        "current_stage": record.current_stage,
        "counters": record.counters.model_dump(),
        "overrides": {k: v.model_dump() for k, v in record.overrides.items()},
        "verdicts": [v.model_dump() for v in record.verdicts],
    }
    attempts = [a.model_dump(mode="json", exclude={"pgid", "start_ticks"}) for a in record.attempts]
    diff, truncated, note = b"", False, None
    if clone_exists:
        # A margin past the cap, so a secret crossing the cut is redacted whole before
        # build_bundle cuts it to size.
        captured = _read_diff(record, services, limits.max_diff_bytes + REDACTION_MARGIN_BYTES)
        diff, truncated, note = captured.data, captured.truncated, captured.error
    else:
        note = "no clone: no diff"
    check = attempt.failing_check
    return BundleInputs(
        run_state=json.dumps(state, indent=1, default=str),
        run_record=json.dumps(attempts, indent=1, default=str),
        ticket_path=Path(record.ticket_snapshot),
        failed_log=Path(attempt.log_path) if attempt.log_path else None,
        check_name=check.name if check else None,
        check_log=Path(check.log_path) if check and check.log_path else None,
        diff=diff,
        diff_truncated=truncated,
        diff_note=note,
    )


def recover(
    record: RunRecord, stage: StageConfig, attempt: Attempt, services: Services
) -> tuple[RunRecord, Effect]:
    """Decide what to do about ``attempt``'s failure and do it. Returns the record and
    the effect (continue from a stage, or a terminal state)."""
    store, config = services.store, services.loaded.config
    if record.state is not RunState.RECOVERING:
        record = record.transition(RunState.RECOVERING, now=services.clock(), stage=stage.name)
        store.save(record)
    code_stage = code_stage_for(config, stage)

    previous = next((v for v in record.verdicts if v.attempt == attempt.number), None)
    if previous is not None:
        decision_record = read_verdict(Path(previous.path))
        halt = HaltReason(decision_record.halt) if decision_record.halt else None
        cap = decision_record.halt == HaltReason.CAP_EXHAUSTED
    else:
        decision_record, halt, cap = _decide_and_persist(
            record, stage, code_stage, attempt, services
        )
        record = record.with_verdict(
            VerdictRef(
                number=decision_record.number,
                attempt=attempt.number,
                source=decision_record.source,
                action=decision_record.action,
                path=str(store.verdict_path(record.run_id, decision_record.number)),
            )
        )
        if decision_record.usage.calls:
            counters = record.counters.model_copy(
                update={"diagnoses": record.counters.diagnoses + 1}
            )
            record = record.model_copy(update={"counters": counters})
        store.save(record)
    services.reporter.note(
        f"verdict {decision_record.number} ({decision_record.source}): {decision_record.action}"
        f" — {decision_record.reason}"
    )
    verdict, errors = validate_verdict_object(decision_record.verdict)
    if verdict is None:
        raise StateError(
            f"state error: {store.verdict_path(record.run_id, decision_record.number)}: "
            f"the persisted verdict no longer validates: {'; '.join(errors)}"
        )
    applying = Applying(
        decision=decision_record,
        verdict=verdict,
        failing_stage=stage,
        code_stage=code_stage,
        halt_reason=halt,
        cap_exhausted=cap,
    )
    record, effect = apply(record, applying, services)
    ref = next(v for v in record.verdicts if v.number == decision_record.number)
    record = record.with_verdict(ref.model_copy(update={"outcome": effect.outcome}))
    now = services.clock()
    if effect.terminal is not None:
        record = record.transition(effect.terminal, now=now, halt=effect.halt, stage=stage.name)
    else:
        record = record.transition(RunState.RUNNING, now=now, stage=effect.resume_at)
    store.save(record)
    return record, effect


def _decide_and_persist(
    record: RunRecord,
    stage: StageConfig,
    code_stage: StageConfig,
    attempt: Attempt,
    services: Services,
) -> tuple[VerdictRecord, HaltReason | None, bool]:
    store, config = services.store, services.loaded.config
    number = len(record.verdicts) + 1
    clone_exists = _clone_exists(record)
    engine, model = engine_and_model(record, code_stage, config)
    check = attempt.failing_check
    ctx = DecisionContext(
        failing_stage=stage.name,
        failing_check=check.name if check else None,
        code_stage=code_stage.name,
        current_engine=engine or None,
        current_model=model or None,
        ladders={name: e.models for name, e in config.engines.items()},
        clone_dir=Path(record.clone_dir),
        recipe_allowlist=config.recovery.recipe_allowlist,
    )
    bundle = build_bundle(
        _bundle_inputs(record, attempt, services, clone_exists), config.recovery.context
    )
    bundle_path = store.bundle_path(record.run_id, number)
    atomic_write(bundle_path, bundle.model_dump_json(indent=1).encode())

    check_output = ""
    if check is not None and check.log_path:
        check_output = tail_bytes(
            Path(check.log_path), config.recovery.context.max_check_output_bytes
        ).text
    budgets = BudgetStore(store.state_dir)
    budget = budgets.load(record.ticket_id)

    def charge() -> None:
        key = f"{record.run_id}:attempt-{attempt.number}:diagnosis-{budget.spent('diagnosis') + 1}"
        budgets.charge(
            record.ticket_id, "diagnosis", key, run_id=record.run_id, at=services.clock()
        )

    decision: Decision = decide(
        ctx=ctx,
        failure=Failure(
            check=ctx.failing_check, output=check_output, ticket_title=record.ticket_title
        ),
        facts=PromptFacts(
            ticket_id=record.ticket_id,
            ticket_kind=record.ticket_kind,
            failing_stage=stage.name,
            failing_check=ctx.failing_check,
            current_engine=ctx.current_engine,
            current_model=ctx.current_model,
            engines={k: list(v) for k, v in ctx.ladders.items()},
            recipe_allowlist=list(config.recovery.recipe_allowlist),
        ),
        bundle_text=bundle.render(),
        clone_exists=clone_exists,
        caps=Caps(budget.spent("diagnosis"), config.recovery.max_diag_invocations_per_ticket),
        gateway_factory=services.gateway_factory,
        charge=charge,
        max_reasks=config.recovery.max_reasks,
        max_tokens=config.model.max_tokens,
    )
    verdict_record = VerdictRecord(
        number=number,
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        attempt=attempt.number,
        failing_stage=stage.name,
        failing_check=ctx.failing_check,
        source=decision.source.value,
        action=decision.verdict.action,
        valid=decision.valid,
        reason=decision.reason,
        halt=decision.halt.value if decision.halt else None,
        verdict=decision.verdict.model_dump(mode="json"),
        errors=decision.errors,
        playbook_entry=decision.playbook_entry,
        model=decision.model,
        prompt_version=PROMPT_VERSION,
        usage=TokenUsage(
            calls=decision.usage.calls,
            input_tokens=decision.usage.input_tokens,
            output_tokens=decision.usage.output_tokens,
        ),
        replies=decision.replies,
        bundle_path=str(bundle_path),
        created_at=services.clock(),
    )
    # Persisted before anything it decided is executed.
    write_verdict(store.verdict_path(record.run_id, number), verdict_record)
    return verdict_record, decision.halt, decision.cap_exhausted
