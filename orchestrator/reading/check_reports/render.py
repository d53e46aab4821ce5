"""The reports' failing cases as the bundle shows them: most useful first, within a byte cap."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.reading.check_reports.model import ReportCase, ReportReading
from orchestrator.reading.check_reports.text import _cut


def _ranked(cases: Sequence[ReportCase]) -> list[ReportCase]:
    """Most useful first: the first case of each cause (a SARIF rule, a JUnit or TAP
    message) before any cause's second, and so on; within a round, errors (a case that
    could not run: often what the others follow from) before failures; then report order."""
    seen: dict[tuple[str, str], int] = {}
    keyed = []
    for index, case in enumerate(cases):
        cause = case.name.split(" ", 1)[0] if case.format == "sarif" else case.message
        round_ = seen.get((case.format, cause), 0)
        seen[(case.format, cause)] = round_ + 1
        keyed.append((round_, case.kind != "error", index, case))
    return [case for *_, case in sorted(keyed, key=lambda k: k[:3])]


def _block(case: ReportCase) -> str:
    lines = [f"[{case.format} {case.kind}] {case.name}"]
    if case.location and case.location not in case.name:
        lines.append(f"  at {case.location}")
    if case.message:
        lines.append(f"  {case.message}")
    if case.trace:
        lines.extend(f"  | {line}" if line else "  |" for line in case.trace.split("\n"))
    lines.append(f"  (from {case.report})")
    return "\n".join(lines)


def render_reports(reading: ReportReading, max_bytes: int) -> str:
    """The bundle's text: a heading, then one block per case, most useful first, whole
    blocks only (one that does not fit is left out and a smaller later one may take its
    place), then the notes that fit; all within ``max_bytes`` of UTF-8. Empty when
    nothing was read and nothing is to be said."""
    if not reading.reports_read and not reading.notes:
        return ""
    blocks = [_block(case) for case in _ranked(reading.cases)]
    notes = [f"note: {n}" for n in reading.notes]

    def heading(shown: int) -> str:
        where = ", ".join(reading.reports_read) or "none"
        count = reading.failing
        text = f"{count} failing case{'s' if count != 1 else ''} in reports read: {where}"
        return _cut(text, 400) + (f" (showing {shown})" if shown < count else "")

    def size(parts: list[str]) -> int:
        return len("\n".join(parts).encode("utf-8"))

    # The heading's length depends on how many blocks are shown: choose the blocks against
    # the longest heading it can have, then write the true one (never longer).
    chosen: list[str] = [heading(0) + " " * len(str(len(blocks)))]
    if size(chosen) > max_bytes:
        return ""
    for part in blocks:
        if size([*chosen, part]) <= max_bytes:
            chosen.append(part)
    shown = len(chosen) - 1
    for part in notes:
        if size([*chosen, part]) <= max_bytes:
            chosen.append(part)
    chosen[0] = heading(shown)
    return "\n".join(chosen)
