"""``orchestrator show RUN_ID``: the run's stages, attempts, halt and paths, readable."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from orchestrator.display import attempt_summary
from orchestrator.errors import StateError
from orchestrator.state import Attempt, RunRecord, RunStore


def _attempt_lines(attempt: Attempt) -> list[str]:
    who = ""
    if attempt.engine:
        who = f" engine={attempt.engine}" + (f" model={attempt.model}" if attempt.model else "")
    lines = [
        f"  #{attempt.number} {attempt.stage}{who} [{attempt.status}] "
        f"{attempt.started_at:%Y-%m-%d %H:%M:%S}Z  {attempt_summary(attempt)}"
    ]
    for check in attempt.checks:
        if check.skipped:
            lines.append(f"      check {check.name}: skipped (not for this ticket kind)")
        else:
            verdict = "timed out" if check.timed_out else f"exit {check.exit_code}"
            lines.append(f"      check {check.name}: {verdict} in {check.duration_s:.2f}s")
    if attempt.log_path:
        lines.append(f"      log: {attempt.log_path}")
    return lines


def _decision_lines(path: Path) -> list[str]:
    """Summary, routing and confidence of one decision, from its verdict file."""
    from orchestrator.verdicts import read_verdict

    try:
        decided = read_verdict(path)
    except StateError as exc:
        return [f"(unreadable: {exc})"]
    proposal = decided.proposal
    usage = decided.usage
    lines = [f"why: {decided.verdict.get('summary', decided.reason)}"]
    lines.append(
        f"routing {proposal.get('routing')} at confidence {proposal.get('confidence')}"
        + (f"; model {decided.model}, {usage.calls} call(s), {usage.input_tokens}+"
           f"{usage.output_tokens} tokens" if usage.calls else "")
    )  # fmt: skip
    return lines


def render(record: RunRecord) -> list[str]:
    lines = [
        f"run      {record.run_id}",
        f"ticket   {record.ticket_id} ({record.ticket_kind}): {record.ticket_title}",
        f"state    {record.state}"
        + (f" at {record.current_stage}" if record.current_stage else ""),
        f"started  {record.created_at:%Y-%m-%d %H:%M:%S}Z   updated {record.updated_at:%Y-%m-%d %H:%M:%S}Z",
    ]
    if record.halt is not None:
        lines.append(f"halt     {record.halt.reason} at {record.halt.stage}: {record.halt.detail}")
    lines.append("stages   " + "  ".join(f"{s.name}={s.status}" for s in record.stages))
    lines.append(
        f"counters attempts={record.counters.attempts} retries={record.counters.retries} "
        f"diagnoses={record.counters.diagnoses}"
    )
    lines.append("attempts")
    for attempt in record.attempts:
        lines.extend(_attempt_lines(attempt))
    if record.verdicts:
        lines.append("verdicts")
    for ref in record.verdicts:
        lines.append(
            f"  {ref.number}. after attempt #{ref.attempt}: {ref.action} ({ref.source}) "
            f"→ {ref.outcome or 'not yet carried out'}"
        )
        lines.extend(f"      {line}" for line in _decision_lines(Path(ref.path)))
        lines.append(f"      file: {ref.path}")
    if record.handoff:
        lines.append(f"handoff  {record.handoff}")
    for sub_ticket in record.sub_tickets:
        lines.append(f"split    {sub_ticket}")
    lines.append(f"clone    {record.clone_dir}")
    lines.append(f"ticket   {record.ticket_snapshot}")
    if record.pull_request:
        lines.append(f"pr       {record.pull_request}")
    return lines


def show(state_dir: Path, run_id: str, out: TextIO, *, as_json: bool = False) -> int:
    store = RunStore(state_dir)
    record = store.load(run_id)
    if as_json:
        out.write(store.record_path(run_id).read_text())
        return 0
    out.write("\n".join(render(record)) + "\n")
    return 0
