"""The report of a real batch (``batch --report --metrics``, then ``orchestrator report``):
every run and decision is on the page, every link is relative and opens its file, nothing
is fetched or scripted, hostile content is text, and the metrics file is valid Prometheus
text whose figures are the batch's."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from orchestrator.cli import main as cli
from orchestrator.domain.runs import RunRecord
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.files import FileStorage

from support.fixture_batch import (
    HOSTILE_LOG,
    HOSTILE_SUMMARY,
    HOSTILE_TITLE,
    FixtureBatch,
    run_fixture_batch,
)
from support.page_checks import check_links, parse
from support.prometheus_text import parse as parse_metrics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> FixtureBatch:
    mp = pytest.MonkeyPatch()
    # The module-scoped batch needs the guards the autouse fixtures give each test.
    from orchestrator.recovery import anthropic_gateway

    mp.setattr(anthropic_gateway, "ALLOW_MODEL_REQUESTS", False)
    mp.delenv("DRY_RUN", raising=False)
    for name in ("ANTHROPIC_API_KEY", "ORCHESTRATOR_CONFIG"):
        mp.delenv(name, raising=False)
    try:
        return run_fixture_batch(tmp_path_factory.mktemp("report"))
    finally:
        mp.undo()


def runs_of(fx: FixtureBatch) -> list[RunRecord]:
    storage = FileStorage(fx.state_dir)
    return sorted(
        (storage.runs.latest_for_ticket(t) for t in ("T-OK", "T-FLAKY", "HOSTILE-1")),  # type: ignore[misc]
        key=lambda r: r.ticket_id,
    )


def test_the_fixture_batch_ran_as_designed(fixture: FixtureBatch) -> None:
    states = {r.ticket_id: str(r.state) for r in runs_of(fixture)}
    assert states == {
        "T-OK": "completed",
        "T-FLAKY": "awaiting-approval",
        "HOSTILE-1": "needs-human",
    }
    assert fixture.api_requests == 2
    assert fixture.exit_code == 3  # needs a human


def test_every_run_and_decision_of_the_batch_is_on_the_page(fixture: FixtureBatch) -> None:
    page = parse(fixture.page.read_text())
    text = page.all_text
    assert f"batch {fixture.batch_id}" in text
    for record in runs_of(fixture):
        assert f"run-{record.run_id}" in page.ids
        assert record.run_id in text and record.ticket_title in text
        for ref in record.verdicts:
            decided = read_verdict(Path(ref.path))
            assert decided.verdict.summary in text
            assert f"{ref.action}" in text
    awaiting = next(r for r in runs_of(fixture) if r.ticket_id == "T-FLAKY")
    state_dir = str(fixture.state_dir.resolve())
    # The exact commands, with the config and the (hostile-named) state dir quoted for a shell.
    import shlex

    prefix = shlex.join(["orchestrator", "--config", str(fixture.config), "--state-dir", state_dir])
    assert f"{prefix} approve {awaiting.run_id}" in text
    assert f"{prefix} reject {awaiting.run_id} --reason 'why it was rejected'" in text
    # Spend: two calls of 1200 + 80 tokens at $3/$15 per million.
    assert "2 call(s), 2400 input + 160 output tokens, estimated cost $0.0096" in text
    assert "2 call(s) of 10" in text  # against the batch's cap
    hostile = next(r for r in runs_of(fixture) if r.ticket_id == "HOSTILE-1")
    assert hostile.handoff is not None
    assert Path(hostile.handoff).read_text() in text  # the hand-off, for the person


def test_links_are_relative_and_open_the_files_behind_the_page(fixture: FixtureBatch) -> None:
    html_text = fixture.page.read_text()
    page = parse(html_text)
    linked = set(check_links(fixture.page, page))
    for record in runs_of(fixture):
        for ref in record.verdicts:
            assert Path(ref.path).resolve() in linked
            bundle = FileStorage(fixture.state_dir).layout.bundle_path(record.run_id, ref.number)
            assert bundle.resolve() in linked
        for attempt in record.attempts:
            assert attempt.log_path is not None
        if record.handoff:
            assert Path(record.handoff).resolve() in linked
    logs = {p for p in linked if p.suffix == ".log"}
    assert len(logs) >= 5  # each attempt's log (and the failing ones')
    # The state dir's hostile name reaches the hrefs percent-encoded, never raw.
    hrefs = [e.attrs["href"] for e in page.tags("a") if not e.attrs["href"].startswith("#")]
    assert all("%22" in h and '"' not in h and "#" not in h and "?" not in h for h in hrefs)


def test_nothing_is_fetched_or_scripted_and_hostile_content_is_text(
    fixture: FixtureBatch,
) -> None:
    html_text = fixture.page.read_text()
    page = parse(html_text)
    assert page.tags("script") == [] and page.tags("img") == [] and page.tags("iframe") == []
    assert page.tags("link") == []  # no stylesheet fetched: it is inline
    for element in page.elements:
        assert not any(k.startswith("on") for k in element.attrs), element
    for tag, url in page.urls():
        assert "://" not in url and not url.startswith("//"), (tag, url)
    assert "evil.example" not in " ".join(u for _, u in page.urls())
    text = page.all_text
    for hostile in (HOSTILE_TITLE, HOSTILE_LOG, HOSTILE_SUMMARY):
        assert hostile in text  # shown as the characters it is made of
    assert "<script>" not in html_text and "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text


def test_the_metrics_file_is_prometheus_text_with_the_batch_figures(
    fixture: FixtureBatch,
) -> None:
    families = parse_metrics(fixture.metrics.read_text())

    def value(name: str, **labels: str) -> float:
        [found] = [
            v for f in families.values() for n, lab, v in f.samples if lab == labels and n == name
        ]
        return found

    assert all(f.help for f in families.values())
    assert value("orchestrator_batch_info", batch=fixture.batch_id, backend="local") == 1
    assert value("orchestrator_batch_tickets", outcome="completed") == 1
    assert value("orchestrator_batch_tickets", outcome="awaiting-approval") == 1
    assert value("orchestrator_batch_tickets", outcome="needs-human") == 1
    assert value("orchestrator_batch_model_calls") == 2
    assert value("orchestrator_batch_model_tokens", direction="input") == 2400
    assert value("orchestrator_batch_model_tokens", direction="output") == 160
    assert value("orchestrator_batch_estimated_cost_usd") == pytest.approx(0.0096)
    assert value("orchestrator_batch_awaiting_approval") == 1
    assert value("orchestrator_batch_decisions", action="retry", source="model") == 1
    assert value("orchestrator_batch_decisions", action="abandon-human", source="model") == 1
    assert families["orchestrator_batch_stage_duration_seconds"].kind == "summary"
    assert value("orchestrator_batch_stage_duration_seconds_count", stage="build") == 3
    assert value("orchestrator_batch_stage_duration_seconds_count", stage="clone") == 3
    # Atomically written: no temp file is left beside it for the collector to trip on.
    assert sorted(p.name for p in fixture.metrics.parent.iterdir()) == ["orchestrator.prom"]


def run_cli(*argv: str) -> tuple[int, str, str]:
    import contextlib

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_report_command_selects_a_batch_runs_or_a_date(
    fixture: FixtureBatch, tmp_path: Path
) -> None:
    common = ("--config", str(fixture.config), "--state-dir", str(fixture.state_dir))
    page = tmp_path / "by-batch.html"
    code, out, err = run_cli("report", "--batch", fixture.batch_id, "--out", str(page), *common)
    assert (code, err) == (0, "")
    assert f"report: 3 run(s) (batch {fixture.batch_id}) written to {page}" in out
    check_links(page, parse(page.read_text()))

    page = tmp_path / "two.html"
    code, out, _ = run_cli("report", "T-OK", "HOSTILE-1", "--out", str(page), *common)
    assert code == 0 and "2 run(s)" in out
    parsed = parse(page.read_text())
    ids = {i for i in parsed.ids if i.startswith("run-") and not i.endswith(("-h", "-tl-t"))}
    assert {i.split("-2026")[0] for i in ids} == {"run-T-OK", "run-HOSTILE-1"}

    code, out, _ = run_cli("report", "--since", "2999-01-01", "--out", str(page), *common)
    assert code == 0 and "0 run(s) (runs active since 2999-01-01 00:00:00Z)" in out
    code, out, _ = run_cli("report", "--since", "2000-01-01", "--out", str(page), *common)
    assert code == 0 and "3 run(s)" in out


def test_the_latest_batch_with_its_metrics_for_a_cron_line(
    fixture: FixtureBatch, tmp_path: Path
) -> None:
    # What a cron line after a batch runs: no id to know, the page and the metrics.
    common = ("--config", str(fixture.config), "--state-dir", str(fixture.state_dir))
    page, metrics = tmp_path / "latest.html", tmp_path / "latest.prom"
    code, out, err = run_cli(
        "report", "--batch", "latest", "--out", str(page), "--metrics", str(metrics), *common
    )
    assert (code, err) == (0, "")
    assert f"report: 3 run(s) (batch {fixture.batch_id}) written to {page}" in out
    assert f"report: metrics (batch {fixture.batch_id}) written to {metrics}" in out
    families = parse_metrics(metrics.read_text())
    assert families["orchestrator_batch_info"]
    assert metrics.read_text() == fixture.metrics.read_text()  # what batch --metrics wrote
    # No batch here yet: said, nothing written; a metrics path into nowhere: refused first.
    (tmp_path / "fresh").mkdir()  # (a state dir that does not exist is refused sooner)
    empty = ("--config", str(fixture.config), "--state-dir", str(tmp_path / "fresh"))
    code, _, err = run_cli("report", "--batch", "latest", "--out", str(tmp_path / "n.html"), *empty)
    assert code == 2 and "report: --batch latest: no batch has run under" in err
    code, _, err = run_cli(
        "report", "--out", str(tmp_path / "n.html"), "--metrics", str(tmp_path / "no" / "m.prom"),
        *common,
    )  # fmt: skip
    assert code == 2 and "report --metrics:" in err and "no such directory" in err
    assert not (tmp_path / "n.html").exists()


def test_an_unknown_batch_or_run_changes_nothing_and_says_why(
    fixture: FixtureBatch, tmp_path: Path
) -> None:
    common = ("--config", str(fixture.config), "--state-dir", str(fixture.state_dir))
    page = tmp_path / "never.html"
    code, _, err = run_cli(
        "report", "--batch", "20000101T000000Z-0000", "--out", str(page), *common
    )
    assert code == 2 and "no record of batch '20000101T000000Z-0000'" in err
    assert fixture.batch_id in err  # the batches that are there
    code, _, err = run_cli("report", "--batch", "../..", "--out", str(page), *common)
    assert code == 2 and "is not a batch id" in err
    code, _, err = run_cli("report", "NOPE-1", "--out", str(page), *common)
    assert code == 7 and "no run 'NOPE-1'" in err
    code, _, err = run_cli(
        "report", "--batch", fixture.batch_id, "T-OK", "--out", str(page), *common
    )
    assert code == 2 and "give one of" in err
    assert not page.exists()


def test_a_batch_that_cannot_publish_is_refused_before_it_runs(
    fixture: FixtureBatch, tmp_path: Path
) -> None:
    code, _, err = run_cli(
        "batch", "--tickets", str(fixture.tickets), "--config", str(fixture.config),
        "--state-dir", str(tmp_path / "state"), "--metrics", str(tmp_path / "no" / "m.prom"),
    )  # fmt: skip
    assert code == 2 and f"batch --metrics: {tmp_path / 'no' / 'm.prom'}: no such directory" in err
    assert not (tmp_path / "state").exists()  # nothing ran


def test_the_batch_record_names_every_ticket_and_its_run(fixture: FixtureBatch) -> None:
    record_path = FileStorage(fixture.state_dir).layout.batch_record_path(fixture.batch_id)
    record = json.loads(record_path.read_text())
    by_ticket = {t["ticket"]: t for t in record["tickets"]}
    assert set(by_ticket) == {"T-OK", "T-FLAKY", "HOSTILE-1"}
    for run in runs_of(fixture):
        assert by_ticket[run.ticket_id]["run_id"] == run.run_id
        assert by_ticket[run.ticket_id]["status"] == str(run.state)
    assert record["spend"] == {
        "calls": 2, "input_tokens": 2400, "output_tokens": 160, "cost_usd": 0.0096,
    }  # fmt: skip
    assert record["ended_at"] is not None and record["backend"] == "local"


@pytest.mark.quick
def test_a_page_that_cannot_be_written_at_the_end_is_said_and_fails_the_batch(
    tmp_path: Path,
) -> None:
    from conftest import bash_stage, write_config, write_ticket

    config = write_config(tmp_path, bash_stage("build", "true"))
    write_ticket(tmp_path / "tickets", "T-1")
    taken = tmp_path / "site" / "index.html"
    taken.mkdir(parents=True)  # a directory where the page should go: the rename fails
    code, out, err = run_cli(
        "batch", "--tickets", str(tmp_path / "tickets"), "--config", str(config),
        "--report", str(taken), "--metrics", str(tmp_path / "site" / "m.prom"),
    )  # fmt: skip
    assert code == 2, out + err
    assert "T-1" in out and "completed" in out  # the batch itself ran
    assert f"batch --report: cannot write {taken}" in err
    assert taken.is_dir() and list(taken.iterdir()) == []
    # The metrics did not depend on the page: the monitoring still hears of the batch.
    assert (
        'orchestrator_batch_tickets{outcome="completed"} 1'
        in (tmp_path / "site" / "m.prom").read_text()
    )


def test_a_batch_that_only_queued_its_tickets_covers_the_runs_they_had_since(
    fixture: FixtureBatch, tmp_path: Path
) -> None:
    """``batch --backend celery --no-wait`` knows no run ids: a queued ticket's run is its
    latest, if it was active after the batch began (an older run is another batch's)."""
    import shutil
    from datetime import timedelta

    from orchestrator.reports.report_reader import Context, Selection, read_report
    from orchestrator.storage.batch_record import BatchRecord, BatchTicket, write_batch_record

    state = tmp_path / "state"
    shutil.copytree(fixture.state_dir, state)
    storage = FileStorage(state)
    ok = storage.runs.latest_for_ticket("T-OK")
    assert ok is not None
    write_batch_record(
        storage.layout,
        BatchRecord(
            batch_id="20261201T000000Z-q000", backend="celery",
            started_at=ok.updated_at - timedelta(seconds=1),
            tickets=(
                BatchTicket(ticket="T-OK", status="queued"),
                BatchTicket(ticket="NEVER-RUN", status="queued"),
            ),
        ),
    )  # fmt: skip
    data = read_report(state, Selection(batch_id="20261201T000000Z-q000"), Context(prices={}))
    assert [r.run_id for r in data.runs] == [ok.run_id]
    later = BatchRecord(
        batch_id="20261201T000000Z-q001", backend="celery",
        started_at=ok.updated_at + timedelta(hours=1),
        tickets=(BatchTicket(ticket="T-OK", status="queued"),),
    )  # fmt: skip
    write_batch_record(storage.layout, later)
    data = read_report(state, Selection(batch_id=later.batch_id), Context(prices={}))
    assert data.runs == ()
    assert data.batch is not None and [t.status for t in data.batch.tickets] == ["queued"]
