"""The base check (issue 27): before the first engine stage, the review checks are run on
the base commit the clone stage checked out, exactly as they will be run on the change
(``attempts.run_check``: same command, sandbox and environment). A check already red
there cannot be made green by the ticket, so by default (``on_red_base = "stop"``) the
run ends ``needs-human`` with halt reason ``base_red`` and a hand-off holding the base's
failure reading: no engine, no model, no diagnosis charged. ``"compare"`` goes on, and
the check's later failures count only where they are new (``execution.against_base``);
``"ignore"`` leaves the check off the base.

Results are a cache per (repository, base commit, check, check config digest) in the
state dir (``storage.base_checks``): a second ticket on the same base, or a run resumed
after a kill, runs nothing again. Nothing of it is an attempt of the run: the record
gains only ``base_commit``, saved with the next write the run makes anyway (a kill
before it re-reads the cache).
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from orchestrator.app.services import Services
from orchestrator.domain.config import CheckConfig, StageConfig
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.execution.against_base import base_check_key
from orchestrator.execution.attempts import run_check, stage_context
from orchestrator.execution.git_calls import head_commit
from orchestrator.execution.stage_env import StageContext
from orchestrator.reading.evidence import extract_evidence, render_evidence
from orchestrator.storage import BaseCheck, CrashPoint
from orchestrator.storage.base_checks import BaseCheckKey, BaseCheckStore

__all__ = ["base_check_due", "check_the_base"]


def base_check_due(record: RunRecord, stage: StageConfig) -> bool:
    """Whether the base is to be checked before ``stage`` runs: it is an engine stage, no
    engine has touched the clone yet (it is still at the base), and no person resumed
    this run past a red base (they chose to go on)."""
    if stage.engine is None or any(a.engine for a in record.attempts):
        return False
    return not any(r.halt and r.halt.reason is HaltReason.BASE_RED for r in record.resumes)


def check_the_base(record: RunRecord, services: Services) -> RunRecord:
    """Check the base commit (each review check not cached for it) and return the record
    with ``base_commit`` set, or ended ``needs-human`` (``base_red``, saved, hand-off
    written) when a check of ``on_red_base = "stop"`` is red there."""
    clone = Path(record.clone_dir)
    store = services.storage.runs
    checks = [
        (stage, check)
        for stage in services.loaded.config.stages
        for check in stage.checks
        if check.on_red_base != "ignore" and (not check.kinds or record.ticket_kind in check.kinds)
    ]
    if not checks or not clone.is_dir():
        return record
    # git hardened as for every call of ours in a clone (``head_commit``); rev-parse checks
    # nothing out, so the clone's drivers need no switching off (``clone_git_env``).
    commit = head_commit(services.executor, clone, services.environ)
    if commit is None:
        services.reporter.note("base check skipped: the clone has no commit to check")
        return record
    record = record.model_copy(update={"base_commit": commit})
    cache = BaseCheckStore(store.state_dir)
    stopping: list[BaseCheck] = []
    for stage, check in checks:
        ctx = stage_context(record, stage.name, "", "", record.counters.attempts, store)
        key = base_check_key(check, stage, ctx)
        result = cache.load(key)
        if result is None:
            log_path = cache.log_path(key)
            result = _run_on_base(key, check, stage, ctx, cache, services, log_path)
        if result is not None and not result.passed and check.on_red_base == "stop":
            stopping.append(result)
    if stopping:
        return _halt_base_red(record, stopping, services)
    return record


def _run_on_base(
    key: BaseCheckKey, check: CheckConfig, stage: StageConfig, ctx: StageContext,
    cache: BaseCheckStore, services: Services, log_path: Path,
) -> BaseCheck | None:  # fmt: skip
    """Run ``check`` on the base (its log kept beside its cached result) and cache what
    it said, with the failure reading of a red one. None, cached never, when the machine
    failed it (network, a missing program...): that says nothing about the base."""
    services.reporter.stage_started(
        stage.name, ctx.attempt, f"check {check.name} on the base {key.commit[:7]}"
    )
    ran = run_check(check, stage, ctx, Path(ctx.clone_dir), log_path, services)
    if ran.failure_class is not None:
        services.reporter.note(
            f"base check {check.name} not judged: {ran.failure_class} ({ran.failure_detail}); "
            "going on without it"
        )
        return None
    reading = None
    limits = services.loaded.config.recovery.context
    if not ran.passed and ran.log_path is not None:
        with suppress(OSError):
            found = extract_evidence(
                Path(ran.log_path),
                window_bytes=limits.evidence_scan_bytes,
                max_bytes=limits.max_evidence_bytes,
            )
            reading = render_evidence(found)
    result = BaseCheck(
        **key._asdict(), passed=ran.passed, exit_code=ran.exit_code, timed_out=ran.timed_out,
        reading=reading, log_path=ran.log_path, checked_at=services.clock(),
        duration_s=ran.duration_s,
    )  # fmt: skip
    cache.save(result)
    services.reporter.note(
        f"base check {check.name} on {key.commit[:7]}: "
        + ("green" if result.passed else f"red (exit {result.exit_code})")
    )
    return result


def _halt_base_red(record: RunRecord, reds: list[BaseCheck], services: Services) -> RunRecord:
    store = services.storage.runs
    handoff = store.write_handoff(record.run_id, services.handoffs.base_red(record, reds))
    names = ", ".join(repr(r.check) for r in reds)
    first = reds[0]
    stage = next(
        s.name
        for s in services.loaded.config.stages
        if any(c.name == first.check for c in s.checks)
    )
    record = record.model_copy(update={"handoff": str(handoff)}).halted(
        RunState.NEEDS_HUMAN,
        reason=HaltReason.BASE_RED,
        stage=stage,
        now=services.clock(),
        detail=(
            f"the base is red: check {names} already fails on the base commit "
            f"{first.commit[:12]}, before any change; no engine or model was run. Fix the "
            f'base, or set on_red_base = "compare" on the check; hand-off: {handoff}'
        ),
    )
    store.save(record, CrashPoint.RUN_ENDED)
    return record
