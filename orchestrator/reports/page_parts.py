"""What every part of the report page is made of: escaped text, times, amounts, tables,
and links relative to where the page is written. Pure."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from urllib.parse import quote

from orchestrator.reports.report_data import Spend


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    utc = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return f'<time datetime="{utc:%Y-%m-%dT%H:%M:%SZ}">{utc:%Y-%m-%d %H:%M:%S}Z</time>'


def usd(value: float | None) -> str:
    return "not recorded" if value is None else f"${value:.4f}"


def anchor(run_id: str) -> str:
    return "run-" + run_id


class Links:
    """Relative links from the page's directory to files the reader found."""

    def __init__(self, page_path: Path) -> None:
        self.base = os.path.abspath(page_path.parent)
        self._relative: dict[str, str] = {}

    def href(self, target: Path) -> str:
        relative = self._relative_of(os.path.abspath(target))
        return esc(quote(relative.replace(os.sep, "/"), safe="/"))

    def _relative_of(self, path: str) -> str:
        """``os.path.relpath(path, self.base)`` for a normalised absolute path, with each
        directory's answer kept: a page links thousands of files in a few directories,
        and relpath splits both paths apart each time (issue 41)."""
        found = self._relative.get(path)
        if found is None:
            parent, name = os.path.split(path)
            if not name or path == self.base or self.base.startswith(path + os.sep):
                # the page's directory or one above it: relpath counts the steps
                found = os.path.relpath(path, self.base)
            else:
                above = self._relative_of(parent)
                found = name if above == os.curdir else os.path.join(above, name)
            self._relative[path] = found
        return found

    def a(self, target: Path | None, label: str) -> str:
        if target is None:
            return ""
        return f'<a href="{self.href(target)}">{esc(label)}</a>'


def spend_line(spend: Spend) -> str:
    return (
        f"{spend.calls} call(s), {spend.input_tokens} input + {spend.output_tokens} output "
        f"tokens, estimated cost {usd(spend.cost_usd)}"
    )


def table(caption: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already-escaped cells."""
    head = "".join(f'<th scope="col">{h}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f"<table><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
