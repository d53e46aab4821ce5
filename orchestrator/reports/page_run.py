"""One run on the report page: its state and halt, the timeline of its attempts and the
same as a table (with a failure's last error lines), every decision inline, and the
hand-off when it needs a person. Pure; every value escaped."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.reports.charts import timeline
from orchestrator.reports.page_parts import Links, anchor, esc, spend_line, when
from orchestrator.reports.report_data import AttemptView, DecisionView, RunView, Spend, spend_of

NEEDS_A_PERSON: Final = ("needs-human", "awaiting-approval")


def _attempt_kind(attempt: AttemptView) -> str:
    if attempt.ok:
        return "ok"
    if attempt.timed_out:
        return "timeout"
    if attempt.status != "finished":
        return "pending"
    return "fail"


def _attempt_rows(run: RunView, links: Links) -> str:
    rows = []
    for attempt in run.attempts:
        who = " ".join(x for x in (attempt.engine, attempt.model) if x)
        result = esc(attempt.summary)
        if attempt.failure_class:
            result += f' <span class="tag">{esc(attempt.failure_class)}</span>'
        checks = "".join(
            f"<li>{esc(c.name)}: "
            + ("skipped" if c.skipped else "timed out" if c.timed_out else esc(f"exit {c.exit_code}"))
            + esc(f" in {c.duration_s:.2f}s")
            + (esc(", failures already on the base: passed") if c.already_on_base else "")
            + (f" ({links.a(c.log, 'log')})" if c.log else "")
            + "</li>"
            for c in attempt.checks
        )  # fmt: skip
        if checks:
            result += f'<ul class="checks">{checks}</ul>'
        if attempt.failure_detail:
            result += f"<div>{esc(attempt.failure_detail)}</div>"
        log = (
            links.a(attempt.log, attempt.log.name) if attempt.log else esc(attempt.log_note or "—")
        )
        took = f"{attempt.duration_s:.2f}s" if attempt.duration_s is not None else "—"
        rows.append(
            f'<tr class="{_attempt_kind(attempt)}"><td>{attempt.number}</td><td>{esc(attempt.stage)}</td>'
            f"<td>{esc(who or '—')}</td><td>{when(attempt.started_at)}</td><td>{esc(took)}</td>"
            f"<td>{result}</td><td>{log}</td></tr>"
        )
        if attempt.error_lines:
            said = "\n".join(attempt.error_lines)
            rows.append(
                f'<tr class="said"><td></td><td colspan="6"><pre class="log">{esc(said)}</pre></td></tr>'
            )
    return (
        '<table class="attempts"><caption>Attempts (the timeline as a table)</caption><thead><tr>'
        '<th scope="col">#</th><th scope="col">stage</th><th scope="col">engine</th>'
        '<th scope="col">started</th><th scope="col">took</th><th scope="col">result</th>'
        '<th scope="col">log</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
    )


def _decision(decision: DecisionView, links: Links) -> str:
    head = (
        f"<strong>{esc(decision.action)}</strong> ({esc(decision.source)}) after attempt "
        f"#{decision.attempt} → {esc(decision.outcome or 'not yet carried out')}"
    )
    lines = []
    if decision.unreadable:
        lines.append(f'<p class="warn">{esc(decision.unreadable)}</p>')
    else:
        if decision.summary:
            lines.append(f'<p class="why">{esc(decision.summary)}</p>')
        if decision.reason and decision.reason != decision.summary:
            lines.append(f"<p>{esc(decision.reason)}</p>")
        where = decision.failing_stage or "?"
        if decision.failing_check:
            where += f" / {decision.failing_check}"
        lines.append(
            f"<p>Failure at {esc(where)}; routed <strong>{esc(decision.routing or '—')}</strong> "
            f"at confidence {esc(decision.confidence if decision.confidence is not None else '—')}"
            + ("" if decision.valid else " (the proposal was invalid: replaced by abandon-human)")
            + "</p>"
        )
        if decision.calls or decision.input_tokens or decision.output_tokens:
            lines.append(
                f"<p>Model {esc(decision.model or 'not recorded')}: "
                + esc(spend_line(Spend(decision.calls, decision.input_tokens,
                                       decision.output_tokens, decision.cost_usd)))
                + "</p>"
            )  # fmt: skip
    if decision.recipe is not None:
        recipe = decision.recipe
        commands = "\n".join(f"$ {argv}   → exit {code}" for argv, code in recipe.commands)
        if commands:
            lines.append(f'<pre class="cmd"><code>{esc(commands)}</code></pre>')
        if recipe.sandbox == "none":
            lines.append('<p class="warn">The recipe ran unsandboxed.</p>')
        if recipe.verifier:
            lines.append(
                f"<p>Verifier {esc(recipe.verifier)}: exit {esc(recipe.verifier_exit)} → "
                f"<strong>{esc(recipe.status or '—')}</strong>"
                + (f" ({esc(recipe.red_reason)})" if recipe.red_reason else "")
                + "</p>"
            )
        elif recipe.red_reason:
            lines.append(f"<p>Recipe refused or failed: {esc(recipe.red_reason)}</p>")
    refused = (decision.outcome or "").endswith(HaltReason.APPROVAL_FORGED.value)
    if decision.approval is not None and refused:
        # The file is shown as found, never as an answer: the run refused it.
        approval = decision.approval
        lines.append(
            f"<p><strong>Approval refused, not carried out:</strong> a file claiming "
            f"{esc(approval.by)} at {when(approval.at)} did not verify (see the halt)</p>"
        )
    elif decision.approval is not None:
        approval = decision.approval
        word = "Approved" if approval.approved else "Rejected"
        lines.append(
            f"<p>{word} by {esc(approval.by)} at {when(approval.at)}"
            + (f": {esc(approval.reason)}" if approval.reason else "")
            + "</p>"
        )
    elif decision.outcome is None and decision.routing not in (None, "auto", "reject"):
        lines.append("<p><strong>Awaiting a person's answer.</strong></p>")
    files = " · ".join(
        x for x in (links.a(decision.verdict_file, "verdict"), links.a(decision.bundle_file, "bundle")) if x
    )  # fmt: skip
    if files:
        lines.append(f'<p class="files">{files}</p>')
    return f'<li value="{decision.number}">{head}{"".join(lines)}</li>'


def render_run(run: RunView, links: Links, now: datetime) -> str:
    meta = [
        f"run <code>{esc(run.run_id)}</code>",
        esc(run.kind),
        f"started {when(run.created_at)}",
        f"updated {when(run.updated_at)}",
    ]
    if run.current_stage:
        meta.append(f"at stage {esc(run.current_stage)}")
    spend = spend_of(run)
    if spend.calls or spend.tokens:
        meta.append(esc(spend_line(spend)))
    parts = [
        f'<article class="run" id="{esc(anchor(run.run_id))}" aria-labelledby="{esc(anchor(run.run_id))}-h">'
        f'<h3 id="{esc(anchor(run.run_id))}-h"><span class="state {esc(run.state)}">{esc(run.state)}</span> '
        f"{esc(run.ticket_id)}: {esc(run.title)}</h3>"
        f'<p class="meta">{" · ".join(meta)}</p>'
    ]
    if run.halt is not None:
        parts.append(
            f'<p class="halt">Halted: {esc(run.halt.reason)} at {esc(run.halt.stage or "—")}: '
            f"{esc(run.halt.detail)}</p>"
        )
    parts.extend(f"<p>Resumed {esc(line)}</p>" for line in run.resumes)
    if run.attempts:
        bars = [
            (
                f"#{a.number} {a.stage}",
                a.started_at,
                a.ended_at,
                _attempt_kind(a),
                f"#{a.number} {a.stage}: {a.summary}",
            )
            for a in run.attempts
        ]
        chart = timeline(
            anchor(run.run_id) + "-tl", f"Timeline of {run.ticket_id}'s attempts", bars, now=now
        )
        parts.append(f'<figure class="tl">{chart}</figure>{_attempt_rows(run, links)}')
    if run.decisions:
        parts.append(
            '<h4>Decisions</h4><ol class="decisions">'
            + "".join(_decision(d, links) for d in run.decisions)
            + "</ol>"
        )
    if run.pull_request:
        parts.append(f"<p>Pull request: {esc(run.pull_request)}</p>")
    if run.sub_tickets:
        parts.append("<p>Split into: " + ", ".join(esc(s) for s in run.sub_tickets) + "</p>")
    if run.handoff_file is not None:
        link = links.a(run.handoff_file, run.handoff_file.name)
        if run.state in NEEDS_A_PERSON and run.handoff_text is not None:
            parts.append(
                f"<details open><summary>Hand-off ({link})</summary>"
                f'<pre class="handoff">{esc(run.handoff_text)}</pre></details>'
            )
        else:
            parts.append(f"<p>Hand-off: {link}</p>")
    if run.record_file is not None:
        parts.append(f'<p class="files">{links.a(run.record_file, "run record")}</p>')
    parts.append("</article>")
    return "".join(parts)
