"""``orchestrator report [--batch ID|latest | --since DATE | RUN_ID…] [--out PATH]
[--metrics PATH]``: one self-contained HTML page about a batch's runs (``latest``: the
batch that started last), the runs active since a date, the named runs, or every run:
outcomes, timelines, decisions, spend, and what waits for a person; with ``--metrics``,
the same figures in Prometheus text format too.

The page is written atomically (a web server never serves half of it), its links relative
to where it is written. A run or verdict file that cannot be read is named on stderr and
on the page; the rest is still reported.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TextIO

from orchestrator.domain.errors import OrchestratorError, UsageError
from orchestrator.reports.report_data import ReportData
from orchestrator.reports.report_reader import Context, Selection, read_report
from orchestrator.storage import publish

DEFAULT_OUT = "report.html"


def context_of(config_file: Path) -> Context:
    """Prices and batch caps from the config; a missing or broken config means none (the
    page then says the cost was not recorded), and no ``--config`` in the commands it
    prints."""
    from orchestrator.domain.config import load_config

    try:
        config = load_config(config_file).config
    except OrchestratorError:
        return Context(prices={})
    return Context(prices=dict(config.prices), caps=config.batch, config_file=config_file)


def write_page(data: ReportData, path: Path, *, what: str) -> Path:
    from orchestrator.reports.page import page_parts

    page = path.expanduser().absolute()
    # Written a part at a time as it is made: the page (thousands of runs) is never held
    # whole, let alone as text, its join and its encoding at once (issue 41: memory).
    return publish(page, page_parts(data, page), what=what)


def write_metrics(data: ReportData, path: Path, *, what: str) -> Path:
    from orchestrator.reports.metrics import render_metrics

    return publish(path.expanduser().absolute(), render_metrics(data), what=what)


def selection_of(batch_id: str | None, since: str | None, run_ids: Sequence[str]) -> Selection:
    chosen = sum(1 for given in (batch_id, since, run_ids) if given)
    if chosen > 1:
        raise UsageError("report: give one of --batch ID, --since DATE or RUN_ID…")
    parsed: datetime | None = None
    if since is not None:
        from orchestrator.cli.commands.verdicts import parse_since

        parsed = parse_since(since)
    return Selection(batch_id=batch_id, since=parsed, run_ids=tuple(run_ids))


def report(
    state_dir: Path,
    config_file: Path,
    selection: Selection,
    out_path: Path,
    out: TextIO,
    *,
    metrics_path: Path | None = None,
    errors: TextIO | None = None,
    now: datetime | None = None,
) -> int:
    # (the page's directory is made; the metrics go where a collector already reads)
    check_destinations([("report --metrics", metrics_path)])
    data = read_report(state_dir, selection, context_of(config_file), now=now)
    for warning in data.warnings:
        print(f"warning: {warning}", file=errors or sys.stderr)
    written = write_page(data, out_path, what="report --out")
    out.write(f"report: {len(data.runs)} run(s) ({data.scope}) written to {written}\n")
    if metrics_path is not None:
        metrics = write_metrics(data, metrics_path, what="report --metrics")
        out.write(f"report: metrics ({data.scope}) written to {metrics}\n")
    return 0


def check_destinations(what_paths: Sequence[tuple[str, Path | None]]) -> None:
    """Before a batch runs: each page or metrics file must go into an existing directory,
    so a typo is refused at once, not after an hour of tickets."""
    for what, path in what_paths:
        if path is not None and not path.expanduser().absolute().parent.is_dir():
            raise UsageError(f"{what}: {path}: no such directory: {path.parent}")


def publish_batch(
    state_dir: Path,
    config_file: Path,
    batch_id: str,
    page_path: Path | None,
    metrics_path: Path | None,
    errors: TextIO,
) -> bool:
    """A finished batch's page and metrics (whichever were asked for), each on its own: a
    page that cannot be written does not cost the monitoring its figures. False, with the
    reason on ``errors``, when one could not be written: the batch itself is done."""
    if page_path is None and metrics_path is None:
        return True
    try:
        data = read_report(state_dir, Selection(batch_id=batch_id), context_of(config_file))
    except OrchestratorError as exc:
        print(f"batch {batch_id}: {exc}", file=errors)
        return False
    written = True
    for path, write, what in (
        (page_path, write_page, "batch --report"),
        (metrics_path, write_metrics, "batch --metrics"),
    ):
        if path is None:
            continue
        try:
            write(data, path, what=what)
        except OrchestratorError as exc:
            print(f"batch {batch_id}: {exc}", file=errors)
            written = False
    return written
