"""Text cut to a byte budget at a line boundary, and the bundle's budget shared by priority."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from orchestrator.recovery.context.model import PRIORITY, Keep, SectionName
from orchestrator.recovery.context.text import _utf8

# A cut moves to the nearest line boundary when there is one this close.
ALIGN_WINDOW_BYTES: Final = 1024
# When the bundle is over its cap, every section first keeps up to this much, so the
# lowest-priority ones (the run state: which stage, why it halted) never vanish entirely.
SECTION_FLOOR_BYTES: Final = 1024


def _fit(text: str, max_bytes: int, keep: Keep) -> tuple[str, bool, bool]:
    """``text`` cut to at most ``max_bytes`` of UTF-8, keeping its head or its tail.
    Returns (text, cut, aligned): ``aligned`` when the cut moved to a line boundary."""
    data = _utf8(text)
    if len(data) <= max_bytes:
        return text, False, False
    # Never give up more than half of what we may keep for a tidy edge.
    reach = min(ALIGN_WINDOW_BYTES, max_bytes // 2)
    aligned = False
    if keep == "tail":
        start = len(data) - max_bytes
        if data[start - 1 : start] != b"\n":
            newline = data.find(b"\n", start, start + reach)
            if newline >= 0:
                start, aligned = newline + 1, True
        kept = data[start:]
    else:
        end = max_bytes
        if data[end - 1 : end] != b"\n":
            newline = data.rfind(b"\n", end - reach, end)
            if newline >= 0:
                end, aligned = newline + 1, True
        kept = data[:end]
    # The source was valid UTF-8, so "ignore" only drops a character split by the cut.
    return kept.decode("utf-8", errors="ignore"), True, aligned


def allocate_bytes(sizes: Mapping[SectionName, int], budget: int) -> dict[SectionName, int]:
    """How many bytes each section may keep when together they are over ``budget``.

    Every section first keeps up to a small floor; then, in ``PRIORITY`` order, each
    keeps all it has while the budget lasts. Deterministic, and under budget unchanged."""
    if sum(sizes.values()) <= budget:
        return dict(sizes)
    floor = min(SECTION_FLOOR_BYTES, budget // (2 * max(1, len(sizes))))
    grant = {name: min(size, floor) for name, size in sizes.items()}
    remaining = budget - sum(grant.values())
    for name in sorted(sizes, key=PRIORITY.index):
        extra = min(sizes[name] - grant[name], remaining)
        grant[name] += extra
        remaining -= extra
    return grant
