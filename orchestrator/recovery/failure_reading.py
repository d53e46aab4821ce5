"""A failed attempt read once for the decision about it: what its evidence bundle is
built from, what the prompt and the playbook are told, and the two signatures it is
known by (the ledger's history, the playbook's deciding lines)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.baseline import Baseline
from orchestrator.domain.config import Config, StageConfig
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.failure_signature import signature_of as deciding_signature
from orchestrator.domain.proposals import Failure, PromptFacts, facts_for
from orchestrator.domain.runs import Attempt, RunRecord, engine_and_model
from orchestrator.domain.verdicts import DecisionContext
from orchestrator.reading.check_reports import read_reports
from orchestrator.reading.deciding import deciding_lines
from orchestrator.reading.error_lines import last_error_line_of
from orchestrator.recovery.confidence import signature_of
from orchestrator.recovery.context import BundleInputs
from orchestrator.recovery.playbook import check_output_of


@dataclass(frozen=True)
class Diff:
    """The branch's diff as captured (bounded by the caller), or why there is none."""

    data: bytes = b""
    truncated: bool = False
    note: str | None = "no clone: no diff"


@dataclass(frozen=True)
class FailureReading:
    decision: DecisionContext
    failure: Failure
    signature: str  # what the ledger's history is kept per (``confidence.signature_of``)
    deciding: FailureSignature  # its deciding lines, masked: what the playbook knows it by
    facts: PromptFacts
    bundle: BundleInputs


def failure_reading(
    record: RunRecord,
    stage: StageConfig,
    attempt: Attempt,
    *,
    code_stage: StageConfig,
    config: Config,
    diff: Diff | None,
    state_dir: Path,
    config_root: Path,
    baseline_of: Callable[[str, str], Baseline | None],
) -> FailureReading:
    """``attempt``'s failure, read for a decision taken now (``diff``: None without a
    clone). The check's declared reports are read from the clone, an untrusted tree
    (``reading.check_reports``); what its green runs print is its baseline, as
    ``baseline_of(repository, check)`` reads it (recovery reads no store itself)."""
    run_state, run_record = _run_texts(record)
    limits, check = config.recovery.context, attempt.failing_check
    check_name = check.name if check else None
    signature = signature_of(stage.name, check_name, attempt.failure_class)
    output, further_up = "", None
    if check is not None and check.log_path:
        output, further_up = check_output_of(Path(check.log_path), limits)
    declared = next((c.reports for c in stage.checks if c.name == check_name), ())
    reports = None
    if declared and diff is not None:
        reports = read_reports(
            Path(record.clone_dir), declared, not_before=attempt.started_at.timestamp()
        )
    lines = deciding_lines(
        attempt.failed_log, failure_class=attempt.failure_class, detail=attempt.failure_detail,
        limits=limits,
    )  # fmt: skip
    stage_said = last_error_line_of(attempt.failed_log)
    baseline = baseline_of(record.repository, check.name) if check is not None else None
    engine, model = engine_and_model(record, code_stage, config)
    decision = DecisionContext(
        failing_stage=stage.name, failing_check=check_name, code_stage=code_stage.name,
        current_engine=engine or None, current_model=model or None,
        ladders={name: e.models for name, e in config.engines.items()},
        clone_dir=Path(record.clone_dir), recipe_allowlist=config.recovery.recipe_allowlist,
    )  # fmt: skip
    failure = Failure(
        check=check_name, output=output, ticket_title=record.ticket_title,
        infra=attempt.failure_class if attempt.failure_class not in (None, "code") else None,
        # A record's stage text is redacted as the record is built, revised or read
        # (``domain.runs.StageText``): it may go into the verdict file and the prompt.
        infra_detail=attempt.failure_detail or attempt.error or None,
        stage_said=stage_said, output_further_up=further_up,
    )  # fmt: skip
    taken = diff or Diff()
    bundle = BundleInputs(
        run_state=run_state, run_record=run_record, ticket_path=Path(record.ticket_snapshot),
        failed_log=Path(attempt.log_path) if attempt.log_path else None, check_name=check_name,
        check_log=Path(check.log_path) if check and check.log_path else None,
        diff=taken.data, diff_truncated=taken.truncated, diff_note=taken.note,
        clone_dir=Path(record.clone_dir), state_dir=state_dir, config_dir=config_root,
        python=Path(sys.executable), reports=reports, baseline=baseline,
    )  # fmt: skip
    return FailureReading(
        decision=decision, failure=failure, signature=signature,
        deciding=deciding_signature(stage.name, check_name, attempt.failure_class, lines),
        facts=facts_for(decision, record.ticket_id, record.ticket_kind), bundle=bundle,
    )  # fmt: skip


def _run_texts(record: RunRecord) -> tuple[str, str]:
    """The run's state and its attempts as the bundle shows them (JSON text)."""
    state = {
        "run_id": record.run_id,
        "state": record.state,
        "current_stage": record.current_stage,
        "counters": record.counters.model_dump(),
        "overrides": {k: v.model_dump() for k, v in record.overrides.items()},
        "verdicts": [v.model_dump() for v in record.verdicts],
    }
    attempts = [a.model_dump(mode="json", exclude={"pgid", "start_ticks"}) for a in record.attempts]
    return json.dumps(state, indent=1, default=str), json.dumps(attempts, indent=1, default=str)
