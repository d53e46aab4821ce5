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

from orchestrator.cli.published import check_destinations, context_of, write_metrics, write_page
from orchestrator.domain.errors import UsageError
from orchestrator.reports.report_reader import Selection, read_report


def selection_of(batch_id: str | None, since: str | None, run_ids: Sequence[str]) -> Selection:
    chosen = sum(1 for given in (batch_id, since, run_ids) if given)
    if chosen > 1:
        raise UsageError("report: give one of --batch ID, --since DATE or RUN_ID…")
    parsed: datetime | None = None
    if since is not None:
        from orchestrator.cli.arguments import parse_since

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
