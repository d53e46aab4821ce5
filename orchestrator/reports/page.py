"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing
fetched, so it opens from ``file://``, from a shared folder or a plain web server, and
prints. Pure: ``render_page(data, page_path)`` returns the page's text.

Everything that came from a ticket, a log, a model or an engine is untrusted: every value
goes through ``html.escape`` (``quote=True``, so attributes are safe too), and every link
is a relative path to a file the reader found, percent-encoded, relative to where the page
is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from orchestrator.domain.lifecycle import HaltReason, RunState, later_batch_may_resume
from orchestrator.reports.charts import bar_chart
from orchestrator.reports.page_parts import Links, anchor, esc, spend_line, table, usd, when
from orchestrator.reports.page_run import render_run
from orchestrator.reports.page_style import STYLE
from orchestrator.reports.report_data import (
    ReportData,
    RunView,
    awaiting,
    decision_mix,
    infra_retries,
    latest_of_each_ticket,
    outcome_counts,
    spend_of,
    time_span,
    total_spend,
)

# Spend per ticket: the chart shows the biggest; the table under it says how many more.
TOP_SPENDERS: Final = 20
CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _summary(data: ReportData) -> str:
    runs = data.runs
    span = time_span(runs)
    spend = total_spend(runs)
    engine_costs = [a.engine_cost_usd for r in runs for a in r.attempts if a.engine_cost_usd]
    items = [
        ("Tickets", f"{len({r.ticket_id for r in runs})} ticket(s) in {len(runs)} run(s)"),
        (
            "Time span",
            f"{when(span[0])} to {when(span[1])}" if span else "no runs",
        ),
        ("Model use in these runs", esc(spend_line(spend))),
        ("Infrastructure retries", str(infra_retries(runs))),
        (
            "Cost engines reported",
            esc(f"${sum(engine_costs):.4f}") if engine_costs else "not recorded",
        ),
    ]
    if data.batch is not None:
        batch = data.batch
        ended = (
            when(batch.ended_at) if batch.ended_at else "not recorded (still running, or stopped)"
        )
        items.insert(
            0,
            ("Batch", f"<code>{esc(batch.batch_id)}</code> ({esc(batch.backend)}), "
             f"{when(batch.started_at)} to {ended}"
             + (" — interrupted" if batch.interrupted else "")),
        )  # fmt: skip
    if data.budget is not None:
        items.append(("Batch model budget", _budget(data)))
    facts = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items)
    counts = outcome_counts(runs)
    outcome_rows = [
        (f'<span class="state {esc(s)}">{esc(s)}</span>', str(n)) for s, n in counts.items()
    ]
    parts = [
        '<section id="summary" aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2>',
        f'<dl class="facts">{facts}</dl>',
        table("Runs by outcome", ("outcome", "runs"), outcome_rows),
    ]
    if data.batch is not None:
        shown = {r.run_id for r in runs}  # (a scan of the runs per ticket was 1,000 x 1,000)
        rows = [
            (
                esc(t.ticket),
                f'<span class="state {esc(t.status)}">{esc(t.status)}</span>',
                f'<a href="#{esc(anchor(t.run_id))}">{esc(t.run_id)}</a>'
                if t.run_id and t.run_id in shown
                else esc(t.run_id or "—"),
                esc(t.detail),
            )
            for t in data.batch.tickets
        ]
        parts.append(
            table(
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
        return f"{value}{unit} of {esc(_cap(cap))}" if cap else f"{value}{unit} (no cap)"

    return "; ".join(
        (
            against(str(spent.calls), budget.max_model_calls, " call(s)"),
            against(str(spent.tokens), budget.max_tokens, " tokens"),
            (
                f"{usd(spent.cost_usd)} of ${budget.max_cost_usd:.2f}"
                if budget.max_cost_usd
                else f"{usd(spent.cost_usd)} (no cap)"
            ),
        )
    )


def _cap(value: float) -> str:
    return f"{value:g}"


def goes_on_by_itself(run: RunView) -> bool:
    """The run waits out an outage, or DRY_RUN stopped it: the next batch that may act
    takes it up (``lifecycle.later_batch_may_resume``). Pure."""
    try:
        state = RunState(run.state)
        halt = HaltReason(run.halt.reason) if run.halt else None
    except ValueError:  # a record of a state or halt this version does not know
        return False
    return later_batch_may_resume(state, halt)


def _goes_on(run: RunView) -> str:
    why = f"{run.halt.reason} at {run.halt.stage}: {run.halt.detail}" if run.halt else ""
    return (
        f'<article class="waiting"><h3>Goes on in the next batch by itself ({esc(run.state)}): '
        f'<a href="#{esc(anchor(run.run_id))}">{esc(run.ticket_id)}</a></h3>'
        f"<p>{esc(why)}</p></article>"
    )


def _waiting(data: ReportData, links: Links) -> str:
    parts = [
        '<section id="waiting" aria-labelledby="waiting-h">'
        '<h2 id="waiting-h">Waiting for a person</h2>'
    ]
    current = latest_of_each_ticket(data)
    pending = awaiting(current)
    # A run a later batch goes on with by itself (issue 43) waits for nobody.
    later = [r for r in current if goes_on_by_itself(r)]
    stuck = [r for r in current if r.state == "needs-human" and r not in later]
    if not pending and not stuck:
        parts.append("<p>Nothing waits for a person.</p>")
        parts += [_goes_on(run) for run in later]
        parts.append("</section>")
        return "".join(parts)
    for item in pending:
        parts.append(
            f'<article class="waiting"><h3>Approve or reject: '
            f'<a href="#{esc(anchor(item.run_id))}">{esc(item.ticket_id)}</a>, decision '
            f"{item.number} ({esc(item.action)})</h3>"
            f"<p>{esc(item.summary)}</p>"
            f"<p>Routed <strong>{esc(item.routing or '—')}</strong> at confidence "
            f"{esc(item.confidence if item.confidence is not None else '—')}.</p>"
            f'<p>To carry it out:</p><pre class="cmd"><code>{esc(item.approve_command)}</code></pre>'
            f"<p>To refuse it (the ticket ends needs-human):</p>"
            f'<pre class="cmd"><code>{esc(item.reject_command)}</code></pre></article>'
        )
    for run in stuck:
        why = f"{run.halt.reason} at {run.halt.stage}: {run.halt.detail}" if run.halt else ""
        parts.append(
            f'<article class="waiting"><h3>Needs a person: '
            f'<a href="#{esc(anchor(run.run_id))}">{esc(run.ticket_id)}</a></h3>'
            f"<p>{esc(why)}</p>"
            + (f"<p>Hand-off: {links.a(run.handoff_file, run.handoff_file.name)}</p>"
               if run.handoff_file else "")
            + "</article>"
        )  # fmt: skip
    parts += [_goes_on(run) for run in later]
    parts.append("</section>")
    return "".join(parts)


def _figure(chart_id: str, title: str, items: list[tuple[str, float]], header: tuple[str, str],
            unit: str = "", css: Sequence[str] | None = None, note: str = "") -> str:  # fmt: skip
    rows = [(esc(label), esc(f"{value:g}")) for label, value in items]
    return (
        f'<figure class="panel">{bar_chart(chart_id, title, items, unit=unit, css=css)}'
        f"<figcaption>{esc(title)}{esc(note)}</figcaption>"
        f"{table(title + ' (the chart as a table)', header, rows)}</figure>"
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
            esc(run.ticket_id),
            esc(run.run_id),
            str(spend.calls),
            str(spend.tokens),
            usd(spend.cost_usd),
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
        f"<figcaption>Model tokens per ticket{esc(note)}</figcaption>"
        + table("Model spend per ticket", ("ticket", "run", "calls", "tokens", "estimated cost"),
                 spend_rows)
        + "</figure>",
        "</div></section>",
    ]  # fmt: skip
    return "".join(parts)


def render_page(data: ReportData, page_path: Path) -> str:
    """The whole page for ``data``, its links relative to ``page_path``'s directory."""
    return "".join(page_parts(data, page_path))


def page_parts(data: ReportData, page_path: Path) -> Iterator[str]:
    """The page for ``data`` in the order it is read, a run at a time: what a writer
    encodes as it goes, so a thousand runs' page is never held twice as text (issue 41)."""
    links = Links(page_path)
    now = data.generated_at
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        # Belt and braces behind the escaping: this page may run no script and fetch
        # nothing, whatever a ticket or a model managed to put into it.
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{esc(data.title)}</title><style>{STYLE}</style></head><body>"
    )
    yield from (
        f"<header><h1>{esc(data.title)}</h1>"
        f"<p>Generated {when(now)} from <code>{esc(data.state_dir)}</code>.</p>"
        '<nav aria-label="Sections"><ul><li><a href="#summary">Summary</a></li>'
        '<li><a href="#waiting">Waiting for a person</a></li>'
        '<li><a href="#charts">At a glance</a></li><li><a href="#tickets">Tickets</a></li>'
        "</ul></nav></header><main>",
        _summary(data),
        _waiting(data, links),
        _charts(data),
        '<section id="tickets" aria-labelledby="tickets-h"><h2 id="tickets-h">Tickets</h2>',
    )
    if not data.runs:
        yield "<p>No runs.</p>"
    yield from (render_run(run, links, now) for run in data.runs)
    yield "</section>"
    if data.warnings:
        yield (
            '<section id="warnings" aria-labelledby="warnings-h"><h2 id="warnings-h">'
            "Files that could not be read</h2><ul>"
            + "".join(f"<li>{esc(w)}</li>" for w in data.warnings)
            + "</ul></section>"
        )
    yield "</main></body></html>\n"
