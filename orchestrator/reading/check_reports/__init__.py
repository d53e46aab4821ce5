"""Structured results first: the failing cases a check's own reports name (issue 25).

A check may declare the reports it writes (``reports = ["junit.xml", "**/*.sarif"]`` in
its config). When it fails, its failing cases — name, message, ``path:line``, the first
lines of the trace — are better evidence than anything found by reading its log, because
the tool itself said which case failed and where. Three formats, told apart by content:
JUnit XML (``junit``), SARIF (``sarif``) and TAP (``tap``); each module says how it is read.

Everything in a clone is untrusted. A report is read only if it is a regular file whose
real path stays inside the clone and not under ``.git``, opened with ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO does not hang) and checked on its descriptor; one written before the
check started is stale (an earlier run's failures are not this run's). Whatever is skipped
or cut short says why in ``notes``; nothing here raises on a report's content.

Text is cleaned (terminal sequences, control characters, bidi overrides, lone surrogates
removed) and bounded, but not redacted: the bundle redacts everything it shows.

Layer: reading, above domain. Reads files; writes none.
"""

from __future__ import annotations

from orchestrator.reading.check_reports.model import ReportCase, ReportFormat, ReportReading
from orchestrator.reading.check_reports.read import read_reports
from orchestrator.reading.check_reports.render import render_reports

__all__ = [
    "ReportCase",
    "ReportFormat",
    "ReportReading",
    "read_reports",
    "render_reports",
]
