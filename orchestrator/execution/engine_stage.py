"""One attempt of an engine stage: prepare the workspace, run the engine through its
adapter, read what the engine reported, commit its work.

    engine_workspace.py prepare    (not for ``patch``, which resets and commits itself)
    <the adapter's invocation>     prompt file / stdin written first
    adapter.report(log tail)       turns, cost, final message, failure class
    engine_workspace.py commit     only when the engine succeeded

All three steps write to the attempt's one log, through the executor.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.domain.config import EngineConfig, StageConfig
from orchestrator.domain.tickets import load_ticket
from orchestrator.engines import EngineReport, EngineTask, adapter_for
from orchestrator.engines.base import FailureClass
from orchestrator.engines.classify import (
    NamedFailure,
    classify,
    marked_failure,
    missing_executable,
    read_named,
)
from orchestrator.execution import runner
from orchestrator.execution.executor import Executor
from orchestrator.execution.stage_env import StageContext, stage_environ
from orchestrator.recovery.last_words import last_marker, regions_up
from orchestrator.recovery.redact import redact

REPORT_TAIL_BYTES = 4 * 1024 * 1024  # the key events (result, errors) are at the end
# What a failed stage or check's own output is read for: its last words.
NAMED_TAIL_BYTES = 64 * 1024
# When those decide nothing, how far up a long log is read (``recovery.last_words``).
DEFAULT_SCAN_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class EngineOutcome:
    process: runner.ProcessOutcome
    report: EngineReport | None
    failure_class: FailureClass | None
    # What named the class when it was not the engine's report (an exhausted resource).
    detail: str | None = None


def log_tail(path: Path, max_bytes: int = REPORT_TAIL_BYTES) -> str:
    """The end of a log, read by seeking: the cost does not grow with the log."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def failure_of_stage(
    outcome: runner.ProcessOutcome, *, scan_bytes: int = DEFAULT_SCAN_BYTES
) -> NamedFailure | None:
    """For a stage that is not an engine: a program that is not there, a timeout, or the
    infrastructure class its output names (``failure_of_output``)."""
    if outcome.ok:
        return None
    if missing_executable(outcome.error) is not None:
        return NamedFailure(FailureClass.CONFIG_ERROR, None)
    if outcome.timed_out:
        return NamedFailure(FailureClass.TIMEOUT, None)
    return failure_of_output(
        outcome.log_path, exit_code=outcome.exit_code, timed_out=False, scan_bytes=scan_bytes
    )


def failure_of_check(
    outcome: runner.ProcessOutcome, *, scan_bytes: int = DEFAULT_SCAN_BYTES
) -> NamedFailure | None:
    """For a review check, read like a stage: a program that is not there, else the class
    its output names. A timeout stays the check's own failure (a hanging test is the
    code's), so it is not read for signs."""
    if missing_executable(outcome.error) is not None:
        return NamedFailure(FailureClass.CONFIG_ERROR, outcome.error)
    if outcome.ok or outcome.timed_out:
        return None
    return failure_of_output(
        outcome.log_path, exit_code=outcome.exit_code, timed_out=False, scan_bytes=scan_bytes
    )


def failure_of_output(
    log_path: Path,
    *,
    exit_code: int | None,
    timed_out: bool,
    scan_bytes: int = DEFAULT_SCAN_BYTES,
) -> NamedFailure | None:
    """The class a failed stage or check names in its log (``::failure-class::``, or a
    recognised sign of exhausted resources, the network or a missing program), with its
    detail redacted: the detail quotes the program's output, which may hold a secret.

    The last words are read first. When they decide nothing (a megabyte of ordinary output
    after the failure: the rest of a test run, a coverage table), the program's last
    ``::failure-class::`` line in the scan window counts, then the lines around its
    root-cause lines (the evidence signatures), read from the lowest one up."""
    named = read_named(
        log_tail(log_path, NAMED_TAIL_BYTES), exit_code=exit_code, timed_out=timed_out
    )
    if named is None and not timed_out:
        named = _named_further_up(log_path, exit_code=exit_code, scan_bytes=scan_bytes)
    if not isinstance(named, NamedFailure):
        return None  # the code's failure, or nothing named
    if named.detail is None:
        return named
    return NamedFailure(named.failure, redact(named.detail))


def _named_further_up(
    log_path: Path, *, exit_code: int | None, scan_bytes: int
) -> NamedFailure | Literal["code"] | None:
    try:
        line = last_marker(log_path, scan_bytes)
        marked = marked_failure(line) if line is not None else None
        if marked is not None:
            return NamedFailure(marked, None)
        for region in regions_up(log_path, scan_bytes):
            found = read_named(region, exit_code=exit_code, timed_out=False)
            if found is not None:
                return found
    except OSError:
        return None  # an unreadable log names nothing; the tail's reading stands
    return None


def run_engine(
    *,
    stage: StageConfig,
    engine: EngineConfig,
    model: str,
    ctx: StageContext,
    environ: dict[str, str],
    log_path: Path,
    executor: Executor,
    on_start: Callable[[runner.ProcessIdentity], None],
    on_tick: Callable[[float], None],
    tick_s: float,
    write_files: Callable[[Mapping[Path, str]], None],
    max_log_bytes: int | None = runner.DEFAULT_MAX_LOG_BYTES,
) -> EngineOutcome:
    """``write_files`` writes the files the engine's invocation names (its prompt) into
    the run's workspace; the run store does, so this module writes nothing itself."""
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
    )
    env = stage_environ(environ, ctx, (*stage.pass_env, *engine.pass_env))
    cwd = ctx.clone_dir

    def step(argv: tuple[str, ...], stdin: Path | None = None) -> runner.ProcessOutcome:
        return executor.run(
            argv, cwd=cwd, env=env, log_path=log_path, timeout_s=stage.timeout_s,
            kill_after_s=stage.kill_after_s, on_start=on_start, on_tick=on_tick,
            tick_s=tick_s, stdin_path=stdin, max_log_bytes=max_log_bytes,
        )  # fmt: skip

    workspace = (sys.executable, "-P", "-m", "orchestrator.stages.engine_workspace")
    if engine.kind != "patch":
        prepared = step((*workspace, "prepare"))
        if not prepared.ok:
            return EngineOutcome(prepared, None, FailureClass.ENGINE_ERROR)
    invocation = adapter.invocation(task)
    write_files(invocation.files)
    outcome = step(invocation.argv, invocation.stdin_path)
    report = adapter.report(log_tail(log_path), outcome.exit_code, outcome.timed_out)
    failure = classify(outcome.exit_code, outcome.timed_out, report, start_error=outcome.error)
    if failure is FailureClass.ENGINE_ERROR and outcome.error is None:
        # A crashed engine's last words may say the machine ran out of disk or memory:
        # that needs a person, where a crash is retried. Only after a crash — a running
        # engine's transcript quotes code, which may say anything.
        named = failure_of_output(log_path, exit_code=outcome.exit_code, timed_out=False)
        if named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED:
            return EngineOutcome(outcome, report, named.failure, named.detail)
    if failure is None and engine.kind != "patch":
        committed = step((*workspace, "commit"))
        if not committed.ok:
            return EngineOutcome(committed, report, FailureClass.ENGINE_ERROR)
    return EngineOutcome(outcome, report, failure)
