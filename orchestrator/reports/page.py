"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing
fetched, so it opens from ``file://``, from a shared folder or a plain web server, and
prints. Pure: ``render_page(data, page_path)`` returns the page's text.

Everything that came from a ticket, a log, a model or an engine is untrusted: every value
goes through ``html.escape`` (``quote=True``, so attributes are safe too), and every link
is a relative path to a file the reader found, percent-encoded, relative to where the page
is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Final
from urllib.parse import quote

from orchestrator.reports.charts import bar_chart, timeline
from orchestrator.reports.page_style import STYLE
from orchestrator.reports.report_data import (
    AttemptView,
    DecisionView,
    ReportData,
    RunView,
    Spend,
    awaiting,
    decision_mix,
    infra_retries,
    outcome_counts,
    spend_of,
    time_span,
    total_spend,
)

# Spend per ticket: the chart shows the biggest; the table under it says how many more.
TOP_SPENDERS: Final = 20
NEEDS_A_PERSON: Final = ("needs-human", "awaiting-approval")
CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    utc = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return f'<time datetime="{utc:%Y-%m-%dT%H:%M:%SZ}">{utc:%Y-%m-%d %H:%M:%S}Z</time>'


def _usd(value: float | None) -> str:
    return "not recorded" if value is None else f"${value:.4f}"


def anchor(run_id: str) -> str:
    return "run-" + run_id


class Links:
    """Relative links from the page's directory to files the reader found."""

    def __init__(self, page_path: Path) -> None:
        self.base = os.path.abspath(page_path.parent)

    def href(self, target: Path) -> str:
        relative = os.path.relpath(os.path.abspath(target), self.base)
        return _e(quote(Path(relative).as_posix(), safe="/"))

    def a(self, target: Path | None, label: str) -> str:
        if target is None:
            return ""
        return f'<a href="{self.href(target)}">{_e(label)}</a>'


def _spend_line(spend: Spend) -> str:
    return (
        f"{spend.calls} call(s), {spend.input_tokens} input + {spend.output_tokens} output "
        f"tokens, estimated cost {_usd(spend.cost_usd)}"
    )


def _table(caption: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already-escaped cells."""
    head = "".join(f'<th scope="col">{h}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f"<table><caption>{_e(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _summary(data: ReportData) -> str:
    runs = data.runs
    span = time_span(runs)
    spend = total_spend(runs)
    engine_costs = [a.engine_cost_usd for r in runs for a in r.attempts if a.engine_cost_usd]
    items = [
        ("Tickets", f"{len({r.ticket_id for r in runs})} ticket(s) in {len(runs)} run(s)"),
        (
            "Time span",
            f"{_when(span[0])} to {_when(span[1])}" if span else "no runs",
        ),
        ("Model use in these runs", _e(_spend_line(spend))),
        ("Infrastructure retries", str(infra_retries(runs))),
        (
            "Cost engines reported",
            _e(f"${sum(engine_costs):.4f}") if engine_costs else "not recorded",
        ),
    ]
    if data.batch is not None:
        batch = data.batch
        ended = (
            _when(batch.ended_at) if batch.ended_at else "not recorded (still running, or stopped)"
        )
        items.insert(
            0,
            ("Batch", f"<code>{_e(batch.batch_id)}</code> ({_e(batch.backend)}), "
             f"{_when(batch.started_at)} to {ended}"
             + (" — interrupted" if batch.interrupted else "")),
        )  # fmt: skip
    if data.budget is not None:
        items.append(("Batch model budget", _budget(data)))
    facts = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items)
    counts = outcome_counts(runs)
    outcome_rows = [
        (f'<span class="state {_e(s)}">{_e(s)}</span>', str(n)) for s, n in counts.items()
    ]
    parts = [
        '<section id="summary" aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2>',
        f'<dl class="facts">{facts}</dl>',
        _table("Runs by outcome", ("outcome", "runs"), outcome_rows),
    ]
    if data.batch is not None:
        rows = [
            (
                _e(t.ticket),
                f'<span class="state {_e(t.status)}">{_e(t.status)}</span>',
                f'<a href="#{_e(anchor(t.run_id))}">{_e(t.run_id)}</a>'
                if t.run_id and any(r.run_id == t.run_id for r in runs)
                else _e(t.run_id or "—"),
                _e(t.detail),
            )
            for t in data.batch.tickets
        ]
        parts.append(
            _table(
                "What the batch did with each ticket", ("ticket", "status", "run", "detail"), rows
            )
        )
    parts.append("</section>")
    return "".join(parts)


def _budget(data: ReportData) -> str:
    budget = data.budget
    assert budget is not None
    if budget.spent is None:
        return "not recorded"
    spent = budget.spent

    def against(value: str, cap: float, unit: str = "") -> str:
        return f"{value}{unit} of {_e(_cap(cap))}" if cap else f"{value}{unit} (no cap)"

    return "; ".join(
        (
            against(str(spent.calls), budget.max_model_calls, " call(s)"),
            against(str(spent.tokens), budget.max_tokens, " tokens"),
            (
                f"{_usd(spent.cost_usd)} of ${budget.max_cost_usd:.2f}"
                if budget.max_cost_usd
                else f"{_usd(spent.cost_usd)} (no cap)"
            ),
        )
    )


def _cap(value: float) -> str:
    return f"{value:g}"


def _waiting(data: ReportData, links: Links) -> str:
    parts = [
        '<section id="waiting" aria-labelledby="waiting-h">'
        '<h2 id="waiting-h">Waiting for a person</h2>'
    ]
    pending = awaiting(data.runs)
    stuck = [r for r in data.runs if r.state == "needs-human"]
    if not pending and not stuck:
        parts.append("<p>Nothing waits for a person.</p></section>")
        return "".join(parts)
    for item in pending:
        parts.append(
            f'<article class="waiting"><h3>Approve or reject: '
            f'<a href="#{_e(anchor(item.run_id))}">{_e(item.ticket_id)}</a>, decision '
            f"{item.number} ({_e(item.action)})</h3>"
            f"<p>{_e(item.summary)}</p>"
            f"<p>Routed <strong>{_e(item.routing or '—')}</strong> at confidence "
            f"{_e(item.confidence if item.confidence is not None else '—')}.</p>"
            f'<p>To carry it out:</p><pre class="cmd"><code>{_e(item.approve_command)}</code></pre>'
            f"<p>To refuse it (the ticket ends needs-human):</p>"
            f'<pre class="cmd"><code>{_e(item.reject_command)}</code></pre></article>'
        )
    for run in stuck:
        why = f"{run.halt.reason} at {run.halt.stage}: {run.halt.detail}" if run.halt else ""
        parts.append(
            f'<article class="waiting"><h3>Needs a person: '
            f'<a href="#{_e(anchor(run.run_id))}">{_e(run.ticket_id)}</a></h3>'
            f"<p>{_e(why)}</p>"
            + (f"<p>Hand-off: {links.a(run.handoff_file, run.handoff_file.name)}</p>"
               if run.handoff_file else "")
            + "</article>"
        )  # fmt: skip
    parts.append("</section>")
    return "".join(parts)


def _figure(chart_id: str, title: str, items: list[tuple[str, float]], header: tuple[str, str],
            unit: str = "", css: Sequence[str] | None = None, note: str = "") -> str:  # fmt: skip
    rows = [(_e(label), _e(f"{value:g}")) for label, value in items]
    return (
        f'<figure class="panel">{bar_chart(chart_id, title, items, unit=unit, css=css)}'
        f"<figcaption>{_e(title)}{_e(note)}</figcaption>"
        f"{_table(title + ' (the chart as a table)', header, rows)}</figure>"
    )


def _charts(data: ReportData) -> str:
    runs = data.runs
    outcomes = list(outcome_counts(runs).items())
    actions = list(decision_mix(runs, "action").items())
    sources = list(decision_mix(runs, "source").items())
    spenders = sorted(
        ((run, spend_of(run)) for run in runs), key=lambda rs: (-rs[1].tokens, rs[0].run_id)
    )
    spenders = [(run, spend) for run, spend in spenders if spend.calls or spend.tokens]
    shown = spenders[:TOP_SPENDERS]
    more = len(spenders) - len(shown)
    note = f" (the {len(shown)} biggest of {len(spenders)})" if more > 0 else ""
    spend_rows = [
        (
            _e(run.ticket_id),
            _e(run.run_id),
            str(spend.calls),
            str(spend.tokens),
            _usd(spend.cost_usd),
        )
        for run, spend in shown
    ]
    parts = [
        '<section id="charts" aria-labelledby="charts-h"><h2 id="charts-h">At a glance</h2>'
        '<div class="grid">',
        _figure("c-outcomes", "Runs by outcome", [(k, float(v)) for k, v in outcomes],
                ("outcome", "runs"), css=[f"bar {s}" for s, _ in outcomes]),
        _figure("c-actions", "Decisions by action", [(k, float(v)) for k, v in actions],
                ("action", "decisions")),
        _figure("c-sources", "Decisions by source", [(k, float(v)) for k, v in sources],
                ("source", "decisions")),
        f'<figure class="panel wide">'
        f"{bar_chart('c-spend', 'Model tokens per ticket' + note, [(r.ticket_id, float(s.tokens)) for r, s in shown])}"
        f"<figcaption>Model tokens per ticket{_e(note)}</figcaption>"
        + _table("Model spend per ticket", ("ticket", "run", "calls", "tokens", "estimated cost"),
                 spend_rows)
        + "</figure>",
        "</div></section>",
    ]  # fmt: skip
    return "".join(parts)


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
        result = _e(attempt.summary)
        if attempt.failure_class:
            result += f' <span class="tag">{_e(attempt.failure_class)}</span>'
        checks = "".join(
            f"<li>{_e(c.name)}: "
            + ("skipped" if c.skipped else "timed out" if c.timed_out else _e(f"exit {c.exit_code}"))
            + _e(f" in {c.duration_s:.2f}s")
            + (f" ({links.a(c.log, 'log')})" if c.log else "")
            + "</li>"
            for c in attempt.checks
        )  # fmt: skip
        if checks:
            result += f'<ul class="checks">{checks}</ul>'
        if attempt.failure_detail:
            result += f"<div>{_e(attempt.failure_detail)}</div>"
        log = links.a(attempt.log, attempt.log.name) if attempt.log else _e(attempt.log_note or "—")
        took = f"{attempt.duration_s:.2f}s" if attempt.duration_s is not None else "—"
        rows.append(
            f'<tr class="{_attempt_kind(attempt)}"><td>{attempt.number}</td><td>{_e(attempt.stage)}</td>'
            f"<td>{_e(who or '—')}</td><td>{_when(attempt.started_at)}</td><td>{_e(took)}</td>"
            f"<td>{result}</td><td>{log}</td></tr>"
        )
        if attempt.error_lines:
            said = "\n".join(attempt.error_lines)
            rows.append(
                f'<tr class="said"><td></td><td colspan="6"><pre class="log">{_e(said)}</pre></td></tr>'
            )
    return (
        '<table class="attempts"><caption>Attempts (the timeline as a table)</caption><thead><tr>'
        '<th scope="col">#</th><th scope="col">stage</th><th scope="col">engine</th>'
        '<th scope="col">started</th><th scope="col">took</th><th scope="col">result</th>'
        '<th scope="col">log</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
    )


def _decision(decision: DecisionView, links: Links) -> str:
    head = (
        f"<strong>{_e(decision.action)}</strong> ({_e(decision.source)}) after attempt "
        f"#{decision.attempt} → {_e(decision.outcome or 'not yet carried out')}"
    )
    lines = []
    if decision.unreadable:
        lines.append(f'<p class="warn">{_e(decision.unreadable)}</p>')
    else:
        if decision.summary:
            lines.append(f'<p class="why">{_e(decision.summary)}</p>')
        if decision.reason and decision.reason != decision.summary:
            lines.append(f"<p>{_e(decision.reason)}</p>")
        where = decision.failing_stage or "?"
        if decision.failing_check:
            where += f" / {decision.failing_check}"
        lines.append(
            f"<p>Failure at {_e(where)}; routed <strong>{_e(decision.routing or '—')}</strong> "
            f"at confidence {_e(decision.confidence if decision.confidence is not None else '—')}"
            + ("" if decision.valid else " (the proposal was invalid: replaced by abandon-human)")
            + "</p>"
        )
        if decision.calls or decision.input_tokens or decision.output_tokens:
            lines.append(
                f"<p>Model {_e(decision.model or 'not recorded')}: "
                + _e(_spend_line(Spend(decision.calls, decision.input_tokens,
                                       decision.output_tokens, decision.cost_usd)))
                + "</p>"
            )  # fmt: skip
    if decision.recipe is not None:
        recipe = decision.recipe
        commands = "\n".join(f"$ {argv}   → exit {code}" for argv, code in recipe.commands)
        if commands:
            lines.append(f'<pre class="cmd"><code>{_e(commands)}</code></pre>')
        if recipe.sandbox == "none":
            lines.append('<p class="warn">The recipe ran unsandboxed.</p>')
        if recipe.verifier:
            lines.append(
                f"<p>Verifier {_e(recipe.verifier)}: exit {_e(recipe.verifier_exit)} → "
                f"<strong>{_e(recipe.status or '—')}</strong>"
                + (f" ({_e(recipe.red_reason)})" if recipe.red_reason else "")
                + "</p>"
            )
        elif recipe.red_reason:
            lines.append(f"<p>Recipe refused or failed: {_e(recipe.red_reason)}</p>")
    if decision.approval is not None:
        approval = decision.approval
        word = "Approved" if approval.approved else "Rejected"
        lines.append(
            f"<p>{word} by {_e(approval.by)} at {_when(approval.at)}"
            + (f": {_e(approval.reason)}" if approval.reason else "")
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


def _run(run: RunView, links: Links, now: datetime) -> str:
    meta = [
        f"run <code>{_e(run.run_id)}</code>",
        _e(run.kind),
        f"started {_when(run.created_at)}",
        f"updated {_when(run.updated_at)}",
    ]
    if run.current_stage:
        meta.append(f"at stage {_e(run.current_stage)}")
    spend = spend_of(run)
    if spend.calls or spend.tokens:
        meta.append(_e(_spend_line(spend)))
    parts = [
        f'<article class="run" id="{_e(anchor(run.run_id))}" aria-labelledby="{_e(anchor(run.run_id))}-h">'
        f'<h3 id="{_e(anchor(run.run_id))}-h"><span class="state {_e(run.state)}">{_e(run.state)}</span> '
        f"{_e(run.ticket_id)}: {_e(run.title)}</h3>"
        f'<p class="meta">{" · ".join(meta)}</p>'
    ]
    if run.halt is not None:
        parts.append(
            f'<p class="halt">Halted: {_e(run.halt.reason)} at {_e(run.halt.stage or "—")}: '
            f"{_e(run.halt.detail)}</p>"
        )
    parts.extend(f"<p>Resumed {_e(line)}</p>" for line in run.resumes)
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
        parts.append(f"<p>Pull request: {_e(run.pull_request)}</p>")
    if run.sub_tickets:
        parts.append("<p>Split into: " + ", ".join(_e(s) for s in run.sub_tickets) + "</p>")
    if run.handoff_file is not None:
        link = links.a(run.handoff_file, run.handoff_file.name)
        if run.state in NEEDS_A_PERSON and run.handoff_text is not None:
            parts.append(
                f"<details open><summary>Hand-off ({link})</summary>"
                f'<pre class="handoff">{_e(run.handoff_text)}</pre></details>'
            )
        else:
            parts.append(f"<p>Hand-off: {link}</p>")
    if run.record_file is not None:
        parts.append(f'<p class="files">{links.a(run.record_file, "run record")}</p>')
    parts.append("</article>")
    return "".join(parts)


def render_page(data: ReportData, page_path: Path) -> str:
    """The whole page for ``data``, its links relative to ``page_path``'s directory."""
    links = Links(page_path)
    now = data.generated_at
    body = [
        f"<header><h1>{_e(data.title)}</h1>"
        f"<p>Generated {_when(now)} from <code>{_e(data.state_dir)}</code>.</p>"
        '<nav aria-label="Sections"><ul><li><a href="#summary">Summary</a></li>'
        '<li><a href="#waiting">Waiting for a person</a></li>'
        '<li><a href="#charts">At a glance</a></li><li><a href="#tickets">Tickets</a></li>'
        "</ul></nav></header><main>",
        _summary(data),
        _waiting(data, links),
        _charts(data),
        '<section id="tickets" aria-labelledby="tickets-h"><h2 id="tickets-h">Tickets</h2>',
    ]
    if not data.runs:
        body.append("<p>No runs.</p>")
    body.extend(_run(run, links, now) for run in data.runs)
    body.append("</section>")
    if data.warnings:
        body.append(
            '<section id="warnings" aria-labelledby="warnings-h"><h2 id="warnings-h">'
            "Files that could not be read</h2><ul>"
            + "".join(f"<li>{_e(w)}</li>" for w in data.warnings)
            + "</ul></section>"
        )
    body.append("</main>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        # Belt and braces behind the escaping: this page may run no script and fetch
        # nothing, whatever a ticket or a model managed to put into it.
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{_e(data.title)}</title><style>{STYLE}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )
