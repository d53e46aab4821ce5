"""The deterministic layers as one corpus case meets them, wired the way a real failure
meets them (``execution.attempts``, ``execution.engine_stage``, ``app.recover``):

    observed_class   the failure class the attempt would be recorded with
    reading          that class and the detail it is recorded with (the sign that named it)
    failure_of       the ``Failure`` the recovery precheck and the playbook look at
    signature_of     the failure's signature, as ``app.recover`` makes it (issue 44)
    decision_context the facts a verdict is checked against (a fixed, typical setup)
    bundle_inputs    what the bundle would be built from: the case's log as the failed
                     log and (for a check) as the check's output, a typical ticket and run

Reads only the case's files; writes nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.failure_signature import signature_of as signature_of_lines
from orchestrator.domain.proposals import Failure
from orchestrator.domain.verdicts import DecisionContext
from orchestrator.engines import adapter_for
from orchestrator.engines.classify import classify
from orchestrator.eval.corpus import Case, CaseLabel
from orchestrator.execution import runner
from orchestrator.execution.engine_stage import REPORT_TAIL_BYTES
from orchestrator.reading.deciding import deciding_lines
from orchestrator.reading.error_lines import last_error_line_of
from orchestrator.reading.failure import log_tail, read_failure
from orchestrator.recovery.context import BundleInputs
from orchestrator.recovery.playbook import check_output_of

# A typical setup for checking verdicts: one engine with a two-model ladder, a second
# engine to switch to, the recipe allow-list of the starter config.
CODE_STAGE: Final = "implement"
REVIEW_STAGE: Final = "review"
LADDERS: Final = {"claude-code": ("claude-haiku-4-5", "claude-sonnet-4-6"), "codex": ("gpt-5",)}
RECIPE_ALLOWLIST: Final = (
    "git",
    "ruff",
    "python -m ruff",
    "bash scripts/dev.sh lint-bug-commit-order",
)
CLONE_DIR: Final = Path("/corpus/clone")
TICKET_FILE: Final = "ticket.md"
# The ticket every case is bundled with (a corpus may carry its own ``ticket.md``).
DEFAULT_TICKET: Final = (
    "---\nid: CORPUS-1\ntitle: Fix the failing check\nkind: bug-fix\nrepo: corpus\n---\n"
    "The check named in the run fails. Find the cause and fix it.\n"
)


def observed_class(case: Case) -> str:
    """The class the attempt would be recorded with ("code" when none: the recovery
    loop treats an unclassified failure as code)."""
    return reading(case)[0]


def reading(case: Case) -> tuple[str, str | None]:
    """The class the attempt would be recorded with and its ``failure_detail`` (what
    named the class: a sign's ``what [sign]: line``, redacted; None when nothing did)."""
    label = case.label
    if label.source == "engine":
        assert label.engine is not None  # the label validator requires it
        report = adapter_for(label.engine).report(
            log_tail(case.log_path, REPORT_TAIL_BYTES), label.exit_code, label.timed_out
        )
        found = classify(label.exit_code, label.timed_out, report, start_error=label.start_error)
        return (found.value if found is not None else "code"), None
    named = read_failure(_outcome(case), kind="stage" if label.source == "stage" else "check").named
    if named is None:
        return "code", None
    return named.failure.value, named.detail


def _outcome(case: Case) -> runner.ProcessOutcome:
    label = case.label
    return runner.ProcessOutcome.instant(
        (label.tool,), label.exit_code, case.log_path, at=datetime(2026, 1, 1, tzinfo=UTC),
        timed_out=label.timed_out, error=label.start_error,
    )  # fmt: skip


def decision_context(label: CaseLabel) -> DecisionContext:
    engine = label.engine if label.engine in LADDERS else "claude-code"
    assert engine is not None
    return DecisionContext(
        failing_stage=CODE_STAGE if label.source == "engine" else REVIEW_STAGE,
        failing_check=label.check,
        code_stage=CODE_STAGE,
        current_engine=engine,
        current_model=LADDERS[engine][0],
        ladders=LADDERS,
        clone_dir=CLONE_DIR,
        recipe_allowlist=RECIPE_ALLOWLIST,
    )


def failure_of(
    case: Case, failure_class: str, limits: ContextLimits, detail: str | None = None
) -> Failure:
    """The ``Failure`` ``app.recover`` would hand to the precheck for this case (its
    infrastructure detail: the attempt's ``failure_detail``, else its start error)."""
    label = case.label
    check_output, further_up = "", None
    if label.check is not None and label.source == "check":
        check_output, further_up = check_output_of(case.log_path, limits)
    return Failure(
        check=label.check if label.source == "check" else None,
        output=check_output,
        ticket_title="Fix the failing check",
        infra=failure_class if failure_class != "code" else None,
        infra_detail=detail or label.start_error,
        stage_said=last_error_line_of(case.log_path),
        output_further_up=further_up,
    )


def signature_of(
    case: Case, failure_class: str, detail: str | None, limits: ContextLimits
) -> FailureSignature:
    """The failure's signature exactly as ``app.recover`` makes it: the failing stage and
    check of the decision's context, the recorded class, the log's deciding lines."""
    ctx = decision_context(case.label)
    lines = deciding_lines(case.log_path, failure_class=failure_class, detail=detail, limits=limits)
    return signature_of_lines(ctx.failing_stage, ctx.failing_check, failure_class, lines)


def bundle_inputs(case: Case, corpus_dir: Path) -> BundleInputs:
    """What ``app.recover`` would build the bundle from. The run state and record are a
    typical run's; there is no diff (the corpus keeps logs, not clones)."""
    label = case.label
    stage = CODE_STAGE if label.source == "engine" else REVIEW_STAGE
    state = {
        "run_id": "corpus-run",
        "state": "running",
        "current_stage": stage,
        "counters": {"attempts": 1, "diagnoses": 0},
        "overrides": {},
        "verdicts": [],
    }
    attempt = {
        "number": 1,
        "stage": stage,
        "status": "finished",
        "exit_code": label.exit_code,
        "timed_out": label.timed_out,
        "error": label.start_error,
        "log_path": f"logs/001-{stage}.log",
        "failing_check": (
            {"name": label.check, "exit_code": label.exit_code, "timed_out": label.timed_out}
            if label.source == "check"
            else None
        ),
    }
    is_check = label.source == "check"
    return BundleInputs(
        run_state=json.dumps(state, indent=1),
        run_record=json.dumps([attempt], indent=1),
        ticket_path=corpus_dir / TICKET_FILE,
        failed_log=case.log_path,
        check_name=label.check if is_check else None,
        check_log=case.log_path if is_check else None,
        diff=b"",
        diff_truncated=False,
        diff_note="corpus case: no clone, no diff",
    )
