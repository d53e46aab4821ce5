"""What a batch leaves for people when it ends, and ``report`` writes on demand: its HTML
page and its Prometheus figures, each written atomically (a web server never serves half
of it; a collector never reads half of them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from orchestrator.domain.errors import OrchestratorError, UsageError
from orchestrator.reports.report_data import ReportData
from orchestrator.reports.report_reader import Context, Selection, read_report
from orchestrator.storage.published import publish


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
