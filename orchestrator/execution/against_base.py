"""A failed check of ``on_red_base = "compare"`` judged against its failure on the base
commit (``reading.base_compare``): failures the base already had do not count. Used by
``attempts.run_check``, so the review stage and a mechanical fix's verifier judge alike."""

from __future__ import annotations

from pathlib import Path

from orchestrator.domain.config import CheckConfig, StageConfig
from orchestrator.domain.runs import CheckResult
from orchestrator.domain.sandbox import effective_sandbox
from orchestrator.execution.stage_env import StageContext
from orchestrator.reading.base_compare import base_templates, failing_lines, judge
from orchestrator.storage import BaseCheckKey
from orchestrator.storage.base_checks import BaseCheckStore, check_digest


def base_check_key(check: CheckConfig, stage: StageConfig, ctx: StageContext) -> BaseCheckKey:
    """The key of ``check``'s result on the run's base commit (``ctx.base_commit``)."""
    digest = check_digest(check, effective_sandbox(check, stage))
    return BaseCheckKey(ctx.repository, ctx.base_commit, check.name, digest)


def judged_against_base(
    result: CheckResult,
    check: CheckConfig,
    stage: StageConfig,
    ctx: StageContext,
    *,
    scan_bytes: int,
) -> CheckResult:
    """``result`` (a failure) as it stands against the base: passed, marked
    ``already_on_base``, when it printed no failing line the base's failing log did not;
    else unchanged. Unchanged too when the check does not compare, the base was not
    checked, was green, or its log is gone."""
    if result.passed or check.on_red_base != "compare" or not ctx.base_commit:
        return result
    if result.failure_class is not None:  # infrastructure is never the base's failure
        return result
    base = BaseCheckStore(ctx.state_dir).load(base_check_key(check, stage, ctx))
    if base is None or base.passed or base.log_path is None or result.log_path is None:
        return result
    try:
        on_base = base_templates(
            Path(base.log_path), check=check.name, repo=ctx.repository, max_bytes=scan_bytes
        )
        failing = failing_lines(Path(result.log_path), window_bytes=scan_bytes)
    except OSError:
        return result
    judgment = judge(
        failing,
        on_base.knows,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        base_exit_code=base.exit_code,
    )
    if not judgment.already_on_base:
        return result  # a failure as any other: recovery reads it as it always does
    return result.revised(already_on_base=True, failure_detail=judgment.describe())
