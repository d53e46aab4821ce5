"""One attempt of an engine stage: prepare the workspace, run the engine through its
adapter, read what the engine reported, commit its work.

    engine_workspace.py prepare    (not for ``patch``, which resets and commits itself)
    <the adapter's invocation>     prompt file / stdin written first
    adapter.report(log tail)       turns, cost, final message, failure class
    engine_workspace.py commit     only when the engine succeeded; its last line says
                                   what it committed and left out as the engine's own

All three steps write to the attempt's one log, through the executor.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.config import EngineConfig, StageConfig
from orchestrator.domain.engine_files import WorkspaceSummary, read_summary
from orchestrator.domain.tickets import load_ticket
from orchestrator.engines import EngineReport, EngineTask, adapter_for
from orchestrator.engines.base import FailureClass
from orchestrator.engines.classify import classify
from orchestrator.execution.executor import Executor
from orchestrator.execution.process import (
    DEFAULT_MAX_LOG_BYTES,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.stage_env import StageContext, stage_environ
from orchestrator.reading.failure import failure_of_output, log_tail
from orchestrator.redaction import process_held

REPORT_TAIL_BYTES = 4 * 1024 * 1024  # the key events (result, errors) are at the end
SUMMARY_BYTES = 1024 * 1024  # the commit step's output: a few lines and its summary


@dataclass(frozen=True)
class EngineOutcome:
    process: ProcessOutcome
    report: EngineReport | None
    failure_class: FailureClass | None
    # What named the class when it was not the engine's report (an exhausted resource).
    detail: str | None = None
    # What the workspace committed and left out as the engine's own; None: no commit step
    # ran, or it said nothing this module could read.
    workspace: WorkspaceSummary | None = None


def run_engine(
    *,
    stage: StageConfig,
    engine: EngineConfig,
    model: str,
    ctx: StageContext,
    environ: dict[str, str],
    log_path: Path,
    executor: Executor,
    on_start: Callable[[ProcessIdentity], None],
    on_tick: Callable[[float], None],
    tick_s: float,
    write_files: Callable[[Mapping[Path, str]], None],
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
    feedback: str | None = None,
) -> EngineOutcome:
    """``write_files`` writes the files the engine's invocation names (its prompt) into
    the run's workspace; the run store does, so this module writes nothing itself.
    ``feedback``: the prompt's "previous attempt" section on a re-run (``feedback.py``)."""
    adapter = adapter_for(engine.kind)
    ticket = load_ticket(ctx.ticket_file)
    task = EngineTask(
        ticket_id=ctx.ticket_id,
        title=ticket.fields.title,
        kind=ctx.ticket_kind,
        body=ticket.body,
        clone_dir=ctx.clone_dir,
        run_dir=ctx.run_dir,
        model=model,
        settings=engine.adapter_settings(),
        attempt=ctx.attempt,
        feedback=feedback,
        # A ticket an older intake wrote has no title in its fence: it is said outside.
        title_fenced=ticket.fields.origin is not None
        and f"Title: {ticket.fields.title}\n" in ticket.body,
    )
    env = stage_environ(environ, ctx, (*stage.pass_env, *engine.pass_env))
    cwd = ctx.clone_dir

    def step(
        argv: tuple[str, ...], stdin: Path | None = None, own: Mapping[str, str] | None = None
    ) -> ProcessOutcome:
        return executor.run(
            ProcessRequest(
                argv, cwd=cwd, env={**env, **(own or {})}, log_path=log_path,
                timeout_s=stage.timeout_s,
                kill_after_s=stage.kill_after_s, on_start=on_start, on_tick=on_tick,
                tick_s=tick_s, stdin_path=stdin, max_log_bytes=max_log_bytes,
            )
        )  # fmt: skip

    workspace = (sys.executable, "-P", "-m", "orchestrator.stages.engine_workspace")
    if engine.kind != "patch":
        prepared = step((*workspace, "prepare"))
        if not prepared.ok:
            return EngineOutcome(prepared, None, FailureClass.ENGINE_ERROR)
    invocation = adapter.invocation(task)
    # The prompt leaves the process: no secret it holds goes with it, in any form (a
    # pass_env token a failed check printed, quoted back by its feedback).
    write_files({path: process_held().redact(text) for path, text in invocation.files.items()})
    outcome = step(invocation.argv, invocation.stdin_path, invocation.env)
    report = adapter.report(
        log_tail(log_path, REPORT_TAIL_BYTES), outcome.exit_code, outcome.timed_out
    )
    failure = classify(outcome.exit_code, outcome.timed_out, report, start_error=outcome.error)
    if failure is FailureClass.ENGINE_ERROR and outcome.error is None:
        # A crashed engine's last words may say the machine ran out of disk or memory:
        # that needs a person, where a crash is retried. Only after a crash — a running
        # engine's transcript quotes code, which may say anything.
        named = failure_of_output(log_path, exit_code=outcome.exit_code, timed_out=False)
        if named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED:
            return EngineOutcome(outcome, report, named.failure, named.detail)
    if failure is None and engine.kind != "patch":
        # Its summary is read only from what the commit step printed: the engine has
        # ended (nothing of it survives its step), so a line it printed is not in there.
        start = log_path.stat().st_size if log_path.exists() else 0
        committed = step((*workspace, "commit"))
        if not committed.ok:
            return EngineOutcome(committed, report, FailureClass.ENGINE_ERROR)
        return EngineOutcome(outcome, report, failure, workspace=_summary(log_path, start))
    return EngineOutcome(outcome, report, failure)


def _summary(log_path: Path, start: int) -> WorkspaceSummary | None:
    try:
        with log_path.open("rb") as log:
            log.seek(start)
            return read_summary(log.read(SUMMARY_BYTES).decode("utf-8", "replace"))
    except OSError:
        return None
