"""The page and the metrics as pure functions of report data: no state dir, no fixtures.
Hostile text in every field a ticket, a log, a model or an engine can fill; links from
anywhere to anywhere; figures that were not recorded."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.reports.metrics import render_metrics
from orchestrator.reports.page import render_page
from orchestrator.reports.page_parts import Links
from orchestrator.reports.report_data import (
    ApprovalView,
    AttemptView,
    Awaiting,
    BatchTicketView,
    BatchView,
    BudgetView,
    CheckView,
    DecisionView,
    HaltView,
    RecipeView,
    ReportData,
    RunView,
    Spend,
)
from orchestrator.reports.run_reader import answer_commands

from support.page_checks import parse
from support.prometheus_text import parse as parse_metrics

EVIL = "\"><script>alert(1)</script><img src=x onerror=alert(2)>&amp;'"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)


def hostile_run(files: Path) -> RunView:
    log = files / f"001-build {EVIL}.log"
    approve, reject = answer_commands("EVIL-1-20261201T030000Z-abcd", files / EVIL, None)
    return RunView(
        run_id="EVIL-1-20261201T030000Z-abcd",
        ticket_id="EVIL-1",
        title=EVIL,
        kind="feature",
        state="awaiting-approval",
        current_stage="build",
        created_at=T0,
        updated_at=T0 + timedelta(seconds=30),
        halt=HaltView(EVIL, EVIL, EVIL),
        attempts=(
            AttemptView(
                number=1,
                stage=EVIL,
                status="finished",
                ok=False,
                summary=EVIL,
                started_at=T0,
                ended_at=T0 + timedelta(seconds=3),
                duration_s=3.0,
                exit_code=1,
                timed_out=False,
                engine=EVIL,
                model=EVIL,
                failing_check=EVIL,
                failure_class=EVIL,
                failure_detail=EVIL,
                checks=(CheckView(EVIL, 1, False, False, 1.0, EVIL, log),),
                log=log,
                error_lines=(EVIL, "</pre><script>alert(5)</script>"),
                engine_cost_usd=0.25,
            ),
            AttemptView(
                number=2,
                stage="build",
                status="running",
                ok=False,
                summary="running",
                started_at=T0 + timedelta(seconds=5),
                ended_at=None,
                duration_s=None,
                exit_code=None,
                timed_out=False,
                log=None,
                log_note=EVIL,
            ),
        ),
        decisions=(
            DecisionView(
                number=1,
                attempt=1,
                source=EVIL,
                action=EVIL,
                outcome=None,
                summary=EVIL,
                reason=EVIL,
                confidence=0.5,
                routing=EVIL,
                failing_stage=EVIL,
                failing_check=EVIL,
                model=EVIL,
                calls=1,
                input_tokens=10,
                output_tokens=5,
                cost_usd=None,
                recipe=RecipeView(((EVIL, 0),), EVIL, 1, EVIL, EVIL, "none"),
                approval=ApprovalView(False, EVIL, T0, EVIL),
                verdict_file=files / f"{EVIL}.verdict-1.json",
                bundle_file=files / "x.bundle-1.json",
            ),
        ),
        awaiting=Awaiting(
            "EVIL-1-20261201T030000Z-abcd", "EVIL-1", 1, EVIL, EVIL, EVIL, 0.5, approve, reject
        ),
        handoff_text=EVIL,
        handoff_file=files / f"{EVIL}.handoff.md",
        pull_request=EVIL,
        sub_tickets=(EVIL,),
        resumes=(EVIL,),
    )


def data_with(run: RunView, **changes: object) -> ReportData:
    data = ReportData(
        title=EVIL,
        scope=EVIL,
        generated_at=T0 + timedelta(minutes=1),
        state_dir=Path("/srv") / EVIL,
        runs=(run,),
        batch=BatchView(
            "20261201T030000Z-abcd", "local", T0, None,
            (BatchTicketView(EVIL, EVIL, run.run_id, EVIL), BatchTicketView(EVIL, "refused", None, EVIL)),
        ),
        budget=BudgetView(Spend(1, 10, 5, None), 3, 0, 1.5),
        warnings=(EVIL,),
    )  # fmt: skip
    return replace(data, **changes)  # type: ignore[arg-type]


def test_hostile_text_in_every_field_renders_as_text(tmp_path: Path) -> None:
    html_text = render_page(data_with(hostile_run(tmp_path)), tmp_path / "out" / "r.html")
    page = parse(html_text)
    assert page.tags("script") == [] and page.tags("img") == []
    assert all(not k.startswith("on") for e in page.elements for k in e.attrs)
    assert "<script>" not in html_text and "onerror=alert(2)>" not in html_text
    text = page.all_text
    assert text.count(EVIL) >= 25  # each field, shown as the characters it is made of
    assert "</pre><script>alert(5)</script>" in text


def test_links_are_relative_to_the_page_and_percent_encoded(tmp_path: Path) -> None:
    run = hostile_run(tmp_path / "state")
    page_path = tmp_path / "site" / "deep" / "r.html"
    page = parse(render_page(data_with(run), page_path))
    hrefs = [e.attrs["href"] for e in page.tags("a") if not e.attrs["href"].startswith("#")]
    assert hrefs, "the page links the files behind it"
    from urllib.parse import unquote, urlsplit

    for href in hrefs:
        parts = urlsplit(href)
        assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == ("", "", "", "")
        assert href.startswith("../../state/")
    opened = {(page_path.parent / unquote(h)).resolve() for h in hrefs}
    assert (tmp_path / "state" / f"001-build {EVIL}.log").resolve() in opened
    assert (tmp_path / "state" / f"{EVIL}.verdict-1.json").resolve() in opened


def test_a_page_far_from_the_state_dir_still_gets_a_correct_relative_path() -> None:
    links = Links(Path("/srv/www/reports/nightly.html"))
    href = links.href(Path("/var/lib/orch/state/runs/a b.log"))
    assert href == "../../../var/lib/orch/state/runs/a%20b.log"
    # A browser resolves it against the page's directory back to the file.
    resolved = os.path.normpath(os.path.join("/srv/www/reports", href.replace("%20", " ")))
    assert resolved == "/var/lib/orch/state/runs/a b.log"


def test_what_was_not_recorded_says_so_and_is_not_made_up(tmp_path: Path) -> None:
    run = replace(hostile_run(tmp_path), attempts=(), decisions=(), awaiting=None, state="failed")
    data = data_with(run, budget=BudgetView(None, 0, 0, 0.0))
    text = parse(render_page(data, tmp_path / "r.html")).all_text
    assert "Batch model budget" in text and "not recorded" in text
    assert "Cost engines reported" in text
    unpriced = replace(hostile_run(tmp_path), state="failed")
    text = parse(render_page(data_with(unpriced), tmp_path / "r.html")).all_text
    assert "estimated cost not recorded" in text
    assert "$0.2500" in text  # what the engine itself reported


def test_the_awaiting_decision_carries_commands_that_a_shell_reads_back(tmp_path: Path) -> None:
    import shlex

    run = hostile_run(tmp_path)
    text = parse(render_page(data_with(run), tmp_path / "r.html")).all_text
    assert run.awaiting is not None
    assert run.awaiting.approve_command in text and run.awaiting.reject_command in text
    argv = shlex.split(run.awaiting.approve_command)
    assert argv == ["orchestrator", "--state-dir", str(tmp_path / EVIL), "approve", run.run_id]
    assert shlex.split(run.awaiting.reject_command)[-3:] == [
        run.run_id, "--reason", "why it was rejected",
    ]  # fmt: skip


def test_an_empty_report_is_a_page_that_says_so(tmp_path: Path) -> None:
    data = ReportData("report", "every run", T0, tmp_path, runs=())
    page = parse(render_page(data, tmp_path / "r.html"))
    assert "No runs." in page.all_text and "Nothing waits for a person." in page.all_text
    parse_metrics(render_metrics(data))


def test_metrics_escape_label_values_and_leave_out_what_was_not_recorded(tmp_path: Path) -> None:
    odd = 'a"b\\c\nd'
    run = hostile_run(tmp_path)
    attempt = replace(run.attempts[0], stage=odd)
    run = replace(run, attempts=(attempt,))
    data = data_with(
        run, batch=BatchView(odd, "local", T0, T0, (BatchTicketView("T", odd, None, ""),))
    )
    families = parse_metrics(render_metrics(data))
    samples = {
        (n, tuple(sorted(lab.items()))): v for f in families.values() for n, lab, v in f.samples
    }
    assert samples[("orchestrator_batch_tickets", (("outcome", odd),))] == 1
    assert samples[("orchestrator_batch_stage_duration_seconds_sum", (("stage", odd),))] == 3.0
    assert samples[("orchestrator_batch_info", (("backend", "local"), ("batch", odd)))] == 1
    # The cost of a call at an unknown price is not written as zero: it is left out.
    assert "orchestrator_batch_estimated_cost_usd" not in families
    assert samples[("orchestrator_batch_budget_cap", (("meter", "calls"),))] == 3


def test_a_screen_reader_finds_landmarks_headings_and_a_text_for_every_chart(
    tmp_path: Path,
) -> None:
    html_text = render_page(data_with(hostile_run(tmp_path)), tmp_path / "r.html")
    page = parse(html_text)
    assert page.tags("html")[0].attrs["lang"] == "en"
    assert len(page.tags("main")) == 1 and len(page.tags("nav")) == 1
    assert len(page.tags("h1")) == 1 and len(page.tags("h2")) >= 4
    charts = page.tags("svg")
    assert len(charts) >= 5  # four at a glance, and the run's timeline
    for chart in charts:
        assert chart.attrs["role"] == "img"
        assert chart.attrs["aria-labelledby"] in page.ids  # its <title>
    # Every table says what it is; the charts' numbers are in tables too.
    assert len(page.tags("table")) == len(page.tags("caption")) >= 6
    assert "(the chart as a table)" in page.all_text
    assert "Attempts (the timeline as a table)" in page.all_text


def test_an_approval_the_run_refused_is_never_shown_as_an_answer(tmp_path: Path) -> None:
    """A forged file (a check wrote it, say) stays on disk for a person to see: the page
    shows it as what it is, not as "Approved by alice"."""
    run = hostile_run(tmp_path)
    forged = replace(
        run.decisions[0],
        outcome="needs-human: approval_forged",
        approval=ApprovalView(True, "alice", T0, None),
    )
    text = parse(
        render_page(data_with(replace(run, decisions=(forged,))), tmp_path / "r.html")
    ).all_text
    assert "Approved by alice" not in text
    assert "Approval refused, not carried out: a file claiming alice" in text
    honest = replace(forged, outcome="retried build")
    text = parse(
        render_page(data_with(replace(run, decisions=(honest,))), tmp_path / "r.html")
    ).all_text
    assert "Approved by alice" in text
