"""One run as the report shows it: its attempts (with each log's last error lines), its
decisions (verdict, approval, recipe and verifier, spend at the configured prices), what
waits for a person and the commands that answer it, its hand-off; every file the page
links found where it is now, beside the run's record.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.domain.errors import StateError
from orchestrator.domain.fix_report import FixReport
from orchestrator.domain.runs import Attempt, RunRecord, VerdictRef
from orchestrator.reading.error_lines import error_lines_of
from orchestrator.reports.attempt_line import attempt_summary
from orchestrator.reports.report_data import (
    ApprovalView,
    AttemptView,
    Awaiting,
    CheckView,
    DecisionView,
    HaltView,
    RecipeView,
    RunView,
)
from orchestrator.storage import PrunedMark, StateStorage, VerdictRecord
from orchestrator.storage.batch_budget import estimate_cost
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.retention import read_mark

AWAITING_APPROVAL = "awaiting-approval"


@dataclass(frozen=True, slots=True)
class Context:
    """What the report is told besides the state dir: prices for the cost estimates, the
    batch caps, and the config a person's ``approve`` should be given."""

    prices: Mapping[str, PriceConfig]
    caps: BatchConfig | None = None
    config_file: Path | None = None


class Files:
    """Which files exist, each as its resolved path (``Path.resolve``), for one report.
    A report looks for thousands of files: what is not a symbolic link resolves to its
    directory's resolved path plus its name, so each directory is resolved once and each
    file costs one ``lstat`` (resolving each file walked every directory above it)."""

    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}

    def _real_dir(self, directory: str) -> str:
        real = self._dirs.get(directory)
        if real is None:
            parent, name = os.path.split(directory)
            try:
                mode = os.lstat(directory).st_mode
            except OSError:
                mode = 0
            if name in ("", os.curdir) or not stat.S_ISDIR(mode):  # a link, or gone
                real = os.path.realpath(directory)
            else:
                real = os.path.join(self._real_dir(parent), name)
            self._dirs[directory] = real
        return real

    def __call__(self, path: str | Path | None) -> Path | None:
        if not path:
            return None
        text = os.fspath(path)
        try:
            mode = os.lstat(text).st_mode
        except (OSError, ValueError):
            return None
        parent, name = os.path.split(text)
        if (
            stat.S_ISREG(mode)
            and os.path.isabs(text)
            and name
            and os.pardir not in text.split(os.sep)
        ):
            return Path(self._real_dir(parent), name)
        found = Path(text)  # a link, a relative path, or not a file: as it always was
        return found.resolve() if found.is_file() else None


class _Workspace:
    """A run's files where they are now. A record names them by absolute path as they
    were when written; a state dir copied or moved since (another machine, a restored
    backup) has them under its own run directory instead, and the old place may hold
    someone else's files by now, so only the run's own directory is looked in."""

    def __init__(self, recorded_run_dir: str, run_dir: Path, files: Files) -> None:
        self.recorded = Path(recorded_run_dir)
        self.run_dir = run_dir
        self.exists = files
        # The same answer as text, for an absolute plain path (what the store records): a
        # report asks this of thousands of files, and Path.relative_to parses each.
        self._prefix = os.path.normpath(recorded_run_dir).rstrip(os.sep) + os.sep
        self._plain = _plain(recorded_run_dir)

    def file(self, recorded: str | Path | None) -> Path | None:
        if not recorded:
            return None
        if self._plain and _plain(recorded):
            path = os.path.normpath(recorded)
            if path.startswith(self._prefix):
                return self.exists(os.path.join(self.run_dir, path[len(self._prefix) :]))
            if path + os.sep != self._prefix:
                return self.exists(path)
        path_ = Path(recorded)
        if path_.is_relative_to(self.recorded):
            return self.exists(self.run_dir / path_.relative_to(self.recorded))
        return self.exists(path_)


def _plain(path: str | Path) -> bool:
    """Absolute, with no ``..`` (which ``Path`` keeps and ``normpath`` would fold) and
    not under ``//`` (which both keep, and ``Path`` counts as a root of its own)."""
    text = os.fspath(path)
    return (
        os.path.isabs(text)
        and not text.startswith(os.sep * 2)
        and os.pardir not in text.split(os.sep)
    )


def _checks(attempt: Attempt, workspace: _Workspace) -> tuple[CheckView, ...]:
    return tuple(
        CheckView(
            name=c.name,
            exit_code=c.exit_code,
            timed_out=c.timed_out,
            skipped=c.skipped,
            duration_s=c.duration_s,
            failure_class=c.failure_class,
            log=workspace.file(c.log_path),
            already_on_base=c.already_on_base,
        )
        for c in attempt.checks
    )


def _attempt(attempt: Attempt, pruned: PrunedMark | None, workspace: _Workspace) -> AttemptView:
    log_path = attempt.failed_log if not attempt.ok else (
        Path(attempt.log_path) if attempt.log_path else None
    )  # fmt: skip
    log = workspace.file(log_path)
    note = None
    if log_path is not None and log is None:
        note = (
            f"log pruned on {pruned.pruned_at} (orchestrator prune)"
            if pruned is not None
            else f"log missing: {log_path}"
        )
    error_lines: tuple[str, ...] = ()
    if not attempt.ok and attempt.status == "finished" and log is not None:
        error_lines = tuple(error_lines_of(log))
    return AttemptView(
        number=attempt.number,
        stage=attempt.stage,
        status=str(attempt.status),
        ok=attempt.ok,
        summary=attempt_summary(attempt),
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        duration_s=attempt.duration_s,
        exit_code=attempt.exit_code,
        timed_out=attempt.timed_out,
        engine=attempt.engine,
        model=attempt.model,
        failing_check=attempt.failing_check.name if attempt.failing_check else None,
        failure_class=attempt.failure_class,
        failure_detail=attempt.failure_detail,
        checks=_checks(attempt, workspace),
        log=log,
        log_note=note,
        error_lines=error_lines,
        engine_cost_usd=attempt.cost_usd,
    )


def _recipe(report: FixReport | None, number: int) -> RecipeView | None:
    """The mechanical fix decision ``number`` ran, from its report."""
    if report is None or report.verdict != number:
        return None
    return RecipeView(
        commands=tuple((shlex.join(c.argv), c.exit_code) for c in report.commands),
        verifier=report.verifier.check,
        verifier_exit=report.verification.exit_code if report.verification else None,
        status=report.status,
        red_reason=report.red_reason or None,
        sandbox=report.sandbox or None,
    )


def _fix_report(storage: StateStorage, run_id: str, number: int) -> FixReport | None:
    """Decision ``number``'s mechanical-fix report; older state dirs kept only the run's
    latest (``_recipe`` checks it is this decision's)."""
    found = storage.runs.read_mechanical_fix(run_id, number)
    return found if found is not None else storage.runs.read_mechanical_fix(run_id)


def _cost(record: VerdictRecord, prices: Mapping[str, PriceConfig]) -> float | None:
    usage = record.usage
    if usage.calls == 0 and usage.input_tokens == 0 and usage.output_tokens == 0:
        return 0.0
    if record.model is None or record.model not in prices:
        return None  # calls were made, at a price the config does not know
    return round(
        estimate_cost(dict(prices), record.model, usage.input_tokens, usage.output_tokens), 6
    )


def _decision(
    storage: StateStorage, record: RunRecord, ref: VerdictRef, context: Context, exists: Files
) -> DecisionView:
    layout = storage.layout
    # Beside the run record, whatever path the record kept (a state dir may have moved).
    verdict_file = exists(layout.verdict_path(record.run_id, ref.number))
    bundle_file = exists(layout.bundle_path(record.run_id, ref.number))
    decided: VerdictRecord | None = None
    unreadable = None
    if verdict_file is None:
        unreadable = f"verdict file missing: {ref.path}"
    else:
        try:
            decided = read_verdict(verdict_file)
        except StateError as exc:
            unreadable = str(exc)
    try:
        approval = storage.approvals.read(record.run_id, ref.number)
    except StateError as exc:
        approval, unreadable = None, unreadable or str(exc)
    recipe = None
    if ref.action == "mechanical-fix":
        try:
            recipe = _recipe(_fix_report(storage, record.run_id, ref.number), ref.number)
        except StateError as exc:
            unreadable = unreadable or str(exc)
    return DecisionView(
        number=ref.number,
        attempt=ref.attempt,
        source=ref.source,
        action=ref.action,
        outcome=ref.outcome,
        summary=decided.verdict.summary if decided else "",
        reason=decided.reason if decided else "",
        confidence=decided.proposal.confidence if decided else None,
        routing=str(decided.proposal.routing) if decided else None,
        valid=decided.valid if decided else True,
        failing_stage=decided.failing_stage if decided else None,
        failing_check=decided.failing_check if decided else None,
        model=decided.model if decided else None,
        calls=decided.usage.calls if decided else 0,
        input_tokens=decided.usage.input_tokens if decided else 0,
        output_tokens=decided.usage.output_tokens if decided else 0,
        # A decision whose file is gone spent what it spent: not recorded, not zero.
        cost_usd=_cost(decided, context.prices) if decided else None,
        recipe=recipe,
        approval=(
            ApprovalView(approval.approved, approval.by, approval.at, approval.reason)
            if approval is not None
            else None
        ),
        verdict_file=verdict_file,
        bundle_file=bundle_file,
        unreadable=unreadable,
    )


def answer_commands(run_id: str, state_dir: Path, config_file: Path | None) -> tuple[str, str]:
    """The exact ``approve`` and ``reject`` commands, with the config and state dir
    spelled out so they work from any directory."""
    options = []
    if config_file is not None:
        options += ["--config", str(config_file)]
    options += ["--state-dir", str(state_dir)]
    prefix = shlex.join(["orchestrator", *options])
    return (
        f"{prefix} approve {shlex.quote(run_id)}",
        f"{prefix} reject {shlex.quote(run_id)} --reason 'why it was rejected'",
    )


def _awaiting(
    record: RunRecord, decisions: tuple[DecisionView, ...], state_dir: Path, context: Context
) -> Awaiting | None:
    if record.state != AWAITING_APPROVAL:
        return None
    pending = next((d for d in reversed(decisions) if d.outcome is None), None)
    if pending is None:
        return None
    config_file = context.config_file or (Path(record.config_path) if record.config_path else None)
    approve, reject = answer_commands(record.run_id, state_dir, config_file)
    return Awaiting(
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        number=pending.number,
        action=pending.action,
        summary=pending.summary,
        routing=pending.routing,
        confidence=pending.confidence,
        approve_command=approve,
        reject_command=reject,
    )


def run_view(
    storage: StateStorage, record: RunRecord, context: Context, files: Files | None = None
) -> RunView:
    """One run, with everything the page shows about it (``files``: the report's, shared
    by its runs)."""
    exists = files if files is not None else Files()
    layout = storage.layout
    pruned = read_mark(layout, record.run_id)
    decisions = tuple(_decision(storage, record, ref, context, exists) for ref in record.verdicts)
    handoff_file = exists(layout.handoff_path(record.run_id))
    workspace = _Workspace(record.run_dir, layout.run_dir(record.run_id), exists)
    handoff_text = None
    if handoff_file is not None:
        try:
            handoff_text = handoff_file.read_text(errors="replace")
        except OSError:
            handoff_text = None
    state_dir = storage.root.resolve()
    return RunView(
        run_id=record.run_id,
        ticket_id=record.ticket_id,
        title=record.ticket_title,
        kind=record.ticket_kind,
        state=str(record.state),
        current_stage=record.current_stage,
        created_at=record.created_at,
        updated_at=record.updated_at,
        halt=(
            HaltView(str(record.halt.reason), record.halt.stage, record.halt.detail)
            if record.halt is not None
            else None
        ),
        attempts=tuple(_attempt(a, pruned, workspace) for a in record.attempts),
        decisions=decisions,
        awaiting=_awaiting(record, decisions, state_dir, context),
        handoff_text=handoff_text,
        handoff_file=handoff_file,
        pull_request=record.pull_request,
        sub_tickets=record.sub_tickets,
        resumes=tuple(
            f"{r.at:%Y-%m-%d %H:%M:%S}Z by {r.by} from {r.from_state}"
            + (f" ({r.halt.reason})" if r.halt is not None else "")
            + f", at stage {r.stage}"
            for r in record.resumes
        ),
        record_file=exists(layout.record_path(record.run_id)),
    )
