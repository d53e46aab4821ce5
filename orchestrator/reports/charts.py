"""Small inline SVG charts for the report: horizontal bars (a count or an amount per
label) and a run's timeline (each attempt a bar on a time axis). Pure: values in, markup
out, every label escaped.

Colours are CSS classes, not fills, so the page's light and dark schemes (and print)
colour them; each chart is an image with a title for screen readers, and the page puts
the same numbers in a table beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Final

# Drawn at about the size shown (a panel is ~20rem wide), so 12px text stays 12px.
WIDTH: Final = 320
TIMELINE_WIDTH: Final = 640
ROW: Final = 22
LABEL_GUTTER: Final = 124
VALUE_GUTTER: Final = 48
MAX_LABEL_CHARS: Final = 16


def _short(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.4g}"


def bar_chart(
    chart_id: str,
    title: str,
    items: Sequence[tuple[str, float]],
    *,
    unit: str = "",
    css: Sequence[str] | None = None,
) -> str:
    """One bar per (label, value), longest first as given; ``css`` a class per bar."""
    height = ROW * max(len(items), 1) + 8
    top = max((value for _, value in items), default=0.0)
    plot = WIDTH - LABEL_GUTTER - VALUE_GUTTER
    parts = [
        f'<svg class="chart" role="img" aria-labelledby="{escape(chart_id)}-t" '
        f'viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{escape(chart_id)}-t">{escape(title)}</title>'
    ]
    if not items:
        parts.append(f'<text x="4" y="{ROW - 6}" class="label">none</text>')
    for index, (label, value) in enumerate(items):
        y = 4 + index * ROW
        width = 0.0 if top <= 0 else max(value / top * plot, 1.5 if value > 0 else 0.0)
        kind = escape(css[index]) if css is not None and index < len(css) else "bar"
        parts.append(
            f'<text x="{LABEL_GUTTER - 6}" y="{y + ROW - 8}" class="label" '
            f'text-anchor="end">{escape(_short(label))}</text>'
            f'<rect x="{LABEL_GUTTER}" y="{y + 2}" width="{width:.1f}" height="{ROW - 6}" '
            f'class="{kind}"/>'
            f'<text x="{LABEL_GUTTER + width + 4:.1f}" y="{y + ROW - 8}" class="value">'
            f"{escape(_number(value) + unit)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _seconds(span: float) -> str:
    if span < 1:
        return f"{span * 1000:.0f}ms"
    if span < 120:
        return f"{span:.1f}s" if span < 10 else f"{span:.0f}s"
    if span < 7200:
        return f"{span / 60:.1f}m"
    return f"{span / 3600:.1f}h"


def timeline(
    chart_id: str,
    title: str,
    bars: Sequence[tuple[str, datetime, datetime | None, str, str]],
    *,
    now: datetime,
) -> str:
    """Each (label, start, end, css class, what happened) a bar on one time axis from the
    first start to the last end; an unfinished bar runs to ``now``. What happened is the
    bar's tooltip (its own ``title``: no script needed)."""
    if not bars:
        return ""
    origin = min(start for _, start, _, _, _ in bars)
    ends = [(end or now) for _, _, end, _, _ in bars]
    span = max((max(ends) - origin).total_seconds(), 0.001)
    plot = TIMELINE_WIDTH - LABEL_GUTTER - 10
    height = ROW * len(bars) + 24
    parts = [
        f'<svg class="chart timeline" role="img" aria-labelledby="{escape(chart_id)}-t" '
        f'viewBox="0 0 {TIMELINE_WIDTH} {height}" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{escape(chart_id)}-t">{escape(title)}</title>'
    ]
    for index, (label, start, end, kind, said) in enumerate(bars):
        y = index * ROW
        x = LABEL_GUTTER + (start - origin).total_seconds() / span * plot
        width = max(((end or now) - start).total_seconds() / span * plot, 2.0)
        parts.append(
            f'<text x="{LABEL_GUTTER - 6}" y="{y + ROW - 8}" class="label" '
            f'text-anchor="end">{escape(_short(label))}</text>'
            f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" '
            f'class="{escape(kind)}"><title>{escape(said)}</title></rect>'
        )
    axis = ROW * len(bars) + 4
    parts.append(
        f'<line x1="{LABEL_GUTTER}" y1="{axis}" x2="{LABEL_GUTTER + plot}" y2="{axis}" '
        'class="axis"/>'
    )
    for fraction in (0.0, 0.5, 1.0):
        x = LABEL_GUTTER + fraction * plot
        anchor = ("start", "middle", "end")[int(fraction * 2)]
        parts.append(
            f'<text x="{x:.1f}" y="{axis + 15}" class="tick" text-anchor="{anchor}">'
            f"{escape('+' + _seconds(fraction * span))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
