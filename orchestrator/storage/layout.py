"""Names of things under the state dir, shared by the fast read-only commands (no
pydantic) and the run store. Run records sit beside their verdict, bundle and
mechanical-fix files in ``runs/``; only a name of the run-id shape is a run record."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

# <ticket-id>-<UTC yyyymmddThhmmssZ>-<4 hex>; ticket ids may themselves contain '.' and '-'.
RUN_ID = re.compile(r"^(?P<ticket>[A-Za-z0-9][A-Za-z0-9._-]{0,63})-\d{8}T\d{6}Z-[0-9a-f]{4}$")


def is_run_id(name: str) -> bool:
    return RUN_ID.match(name) is not None


def run_record_paths(runs_dir: Path, ticket_id: str | None = None) -> Iterator[Path]:
    """``runs/<run-id>.json`` files (of one ticket, if given), in name order."""
    pattern = f"{ticket_id}-*.json" if ticket_id else "*.json"
    for path in sorted(runs_dir.glob(pattern)):
        match = RUN_ID.match(path.stem)
        if match and (ticket_id is None or match.group("ticket") == ticket_id):
            yield path
