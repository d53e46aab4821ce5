"""Report text made safe and small: cleaned of terminal and control characters, cut."""

from __future__ import annotations

import re
from typing import Final

from orchestrator.domain.terminal import plain
from orchestrator.reading.check_reports.limits import MESSAGE_CHARS, TRACE_CHARS, TRACE_LINES, MiB

_CONTROL: Final = re.compile(
    # C0 and C1 controls but tab and newline; bidi overrides and isolates, zero-width
    # characters (text that reads differently from what it says); lone surrogates (JSON
    # escapes can make them; no UTF-8 encoder takes them).
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SPACES: Final = re.compile(r"\s+")


def _clean(text: str) -> str:
    return _CONTROL.sub("", plain(text).replace("\r\n", "\n").replace("\r", "\n"))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cleaned, its line breaks and runs of blanks made single spaces, cut."""
    return _cut(_SPACES.sub(" ", _clean(text[: limit * 8])).strip(), limit)


def _first_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    for line in _clean(text[: limit * 8]).split("\n"):
        if line.strip():
            return _one_line(line, limit)
    return ""


def _trace(text: str) -> str:
    """The first ``TRACE_LINES`` lines of ``text`` (blank ones at either end dropped),
    within ``TRACE_CHARS``."""
    lines = [ln.rstrip() for ln in _clean(text[: TRACE_CHARS * 4]).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    kept: list[str] = []
    size = 0
    for line in lines[:TRACE_LINES]:
        cost = len(line) + (1 if kept else 0)
        if size + cost > TRACE_CHARS:
            if not kept:
                kept.append(_cut(line, TRACE_CHARS))
            break
        kept.append(line)
        size += cost
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept)


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n:,} bytes"
