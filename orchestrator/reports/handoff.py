"""The hand-off: what a person needs when a ticket stops and needs them — what failed
(with the failed program's last error lines), what was tried, where the evidence is.
Rendering only: the CLI hands ``MARKDOWN`` to the run loop (``execution.reporter``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.domain.runs import RunRecord
from orchestrator.execution.reporter import HandoffFacts, Handoffs
from orchestrator.reading.error_lines import error_lines_of
from orchestrator.storage.layout import StateLayout

if TYPE_CHECKING:
    from orchestrator.storage import BaseCheck


def next_steps(halt: str, run_id: str, ticket_id: str) -> list[str]:
    """The commands that continue a run stopped for ``halt``: every hand-off names them.
    Pure."""
    resume = f"`orchestrator resume {run_id}`"
    if halt == "dry_run_block":
        return [
            f"- the next `DRY_RUN=false orchestrator batch` continues it from the blocked stage, "
            f"or `DRY_RUN=false orchestrator resume {run_id}` now (the environment that runs "
            "it decides DRY_RUN)"
        ]
    if halt == "infra_unavailable":  # issue 43: a waiting run, not a stop
        return [
            "- nothing yet: the next batch goes on from the failed stage, its caps untouched; "
            "a person is told if the outage outlasts `[recovery] infra_wait_max_h`",
            f"- or {resume} now, once the forge, the model provider or the network is back",
        ]
    if halt == "infra_wait_expired":
        return [
            "- once the forge, the model provider or the network answers again: "
            f"{resume} (it goes on from the stage that failed)"
        ]
    if halt == "cap_exhausted":
        return [
            f'- its caps are spent: `orchestrator reset {ticket_id} --reason "…"`, then {resume}'
        ]
    if halt in ("human_rejected", "base_red"):
        return [
            "- fix the ticket or the project, then start the ticket again: "
            "`orchestrator run TICKET_FILE --rerun` (a new run, from the base as it is then)"
        ]
    return [
        f"- fix what stopped it (above), then {resume}: it goes on from the stage that "
        "stopped (`--from-stage STAGE` to go back further)",
        f'- if its caps are spent, `orchestrator reset {ticket_id} --reason "…"` first',
    ]


def render_handoff(record: RunRecord, facts: HandoffFacts) -> str:
    """The hand-off as Markdown."""
    failed = record.last_failed_attempt()
    lines = [
        f"# Hand-off: {record.ticket_id} — {record.ticket_title}",
        "",
        (
            f"Run `{record.run_id}` waits out an outage; the next batch goes on with it."
            if facts.halt == "infra_unavailable"
            else f"Run `{record.run_id}` stopped and needs a human."
        ),
        "",
        f"**Why:** {facts.why}",
        "",
        "## What failed",
    ]
    if failed is not None:
        check = failed.failing_check
        named = f"check `{check.name}` exited {check.exit_code}" if check else None
        how = (named or f"exit {failed.exit_code}") + (" (timed out)" if failed.timed_out else "")
        lines.append(f"- stage `{failed.stage}` (attempt {failed.number}): {how}")
        lines.append(f"- log: `{failed.log_path}`")
        # Kept here as well as in the log: ``orchestrator prune`` removes logs, never this.
        said = error_lines_of(failed.failed_log)
        if said:
            lines += ["", "Its last error lines (redacted):", "", *(f"    {line}" for line in said)]
    lines += ["", "## What was tried"]
    for attempt in record.attempts:
        lines.append(
            f"- attempt {attempt.number}: `{attempt.stage}` "
            f"{'engine ' + attempt.engine + ' ' if attempt.engine else ''}"
            f"{'model ' + attempt.model + ' ' if attempt.model else ''}→ {attempt.status}, exit {attempt.exit_code}"
        )
    for ref in record.verdicts:
        if ref.number != facts.verdict_number:
            lines.append(f"- verdict {ref.number} ({ref.source}): `{ref.action}` → {ref.outcome}")
    lines.append(
        f"- verdict {facts.verdict_number} ({facts.source}): `{facts.action}` — {facts.reason}"
    )
    lines += ["", "## To continue", *next_steps(facts.halt, record.run_id, record.ticket_id)]
    lines += [
        "",
        "## Evidence",
        f"- run record: `{facts.record_path}`",
        f"- verdict: `{facts.verdict_path}`",
        f"- context bundle: `{facts.bundle_path or 'none'}`",
        f"- logs: `{StateLayout.of_run_dir(Path(record.run_dir)).logs_dir(record.run_id)}`",
        f"- clone: `{record.clone_dir}`",
        f"- ticket: `{record.ticket_snapshot}`",
        "",
    ]
    return "\n".join(lines)


def render_base_red_handoff(record: RunRecord, reds: Sequence[BaseCheck]) -> str:
    """The hand-off of a run stopped before any change because the base is red: each
    check that fails on the base commit, and what its log says (the failure reading)."""
    commit = reds[0].commit
    lines = [
        f"# Hand-off: {record.ticket_id} — {record.ticket_title}",
        "",
        f"Run `{record.run_id}` stopped and needs a human.",
        "",
        f"**Why:** the base is red: the review checks below already fail on the base commit "
        f"`{commit}` of branch `{record.base_branch}`, before any change. Nothing the ticket "
        "does can make them pass, so no engine ran and no model was asked.",
        "",
        "Fix the base (a new run checks the new base commit), or set "
        '`on_red_base = "compare"` on the check in config.toml so that only failures the '
        "base does not have count.",
        "",
        "## To continue",
        *next_steps("base_red", record.run_id, record.ticket_id),
        "",
        "## What fails on the base",
    ]
    for red in reds:
        how = "timed out" if red.timed_out else f"exited {red.exit_code}"
        lines += ["", f"### check `{red.check}` {how}", "", f"- log: `{red.log_path}`"]
        if red.reading:
            lines += ["", "Its failure reading (redacted):", ""]
            lines += [f"    {line}" for line in red.reading.splitlines()]
    lines += [
        "",
        "## Evidence",
        f"- repository: `{record.repository}`",
        f"- clone (at the base commit): `{record.clone_dir}`",
        f"- ticket: `{record.ticket_snapshot}`",
        "",
    ]
    return "\n".join(lines)


MARKDOWN = Handoffs(stopped=render_handoff, base_red=render_base_red_handoff)
