"""Argument types the commands share (argparse ``type=`` callables: a bad value is
refused by argparse with the option's name, before anything runs), the durations and
dates commands read from their options, and the sizes they print."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, date, datetime, timedelta

from orchestrator.domain import errors


def positive(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


_DURATION = re.compile(r"^(?P<n>\d{1,6})(?P<unit>[smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s``: a whole number and one unit. Pure."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise errors.UsageError(
            f"prune: --older-than: {text!r} is not a duration; "
            "give a whole number and a unit: s, m, h, d or w (e.g. 30d, 12h)"
        )
    return timedelta(seconds=int(match.group("n")) * _UNIT[match.group("unit")])


def parse_since(text: str) -> datetime:
    """An ISO date (``2026-11-30``, midnight UTC) or datetime (naive means UTC)."""
    value = text.strip()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise errors.UsageError(
                f"usage error: --since {text!r}: not an ISO date or datetime "
                "(e.g. 2026-11-30 or 2026-11-30T14:00:00Z)"
            ) from None
        parsed = datetime(day.year, day.month, day.day)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def human_bytes(count: int) -> str:
    """``512 B``, ``3.4 KiB``, ``12.0 MiB``, ``1.2 GiB``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
