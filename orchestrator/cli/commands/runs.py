"""``orchestrator runs``: one line per run (id, ticket, state, stage, age).

Deliberately reads the records with plain ``json``, and of each only its head (what is
listed; ``storage.run_headers``): listing must start in a few tens of milliseconds, even
over a week of cron's thousands of runs, and a corrupt record is reported on stderr
without hiding the others.

``--json`` fields (one object per run, per line):

- ``run_id``: the run (RUN)
- ``ticket_id``: its ticket (TICKET)
- ``state``: its state: pending, running, recovering, awaiting-approval, waiting-infra
  (an outage outlasted the back-off: the next batch goes on), completed, failed,
  needs-human (STATE)
- ``current_stage``: the stage it is at or stopped at, or null (STAGE)
- ``updated_at``: when its record last changed, ISO 8601 (what AGE is counted from)
- ``created_at``: when it started, ISO 8601
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from orchestrator.storage.layout import StateLayout
from orchestrator.storage.run_listing import run_headers

COLUMNS = ("run_id", "ticket_id", "state", "current_stage", "updated_at")


def humanize_age(seconds: float) -> str:
    """``42s``, ``7m``, ``3h``, ``2d``: enough to tell a stuck run from a fresh one."""
    seconds = max(0.0, seconds)
    for limit, unit, size in ((120, "s", 1), (7200, "m", 60), (172800, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds // 86400)}d"


def read_run_headers(
    runs_dir: Path, errors: TextIO, ticket: str | None = None
) -> list[dict[str, Any]]:
    """Each record's head (of one ticket's records only, if given: no other is read)."""
    headers = []
    tickets = None if ticket is None else (ticket,)
    for path, raw in run_headers(runs_dir, COLUMNS, also=("created_at",), ticket_ids=tickets):
        if isinstance(raw, str):
            print(f"warning: {path}: unreadable run record: {raw}", file=errors)
            continue
        headers.append(raw)
    headers.sort(key=lambda r: str(r.get("created_at", "")))
    return headers


def runs(
    state_dir: Path,
    out: TextIO,
    *,
    as_json: bool = False,
    state: str | None = None,
    ticket: str | None = None,
    errors: TextIO = sys.stderr,
) -> int:
    headers = [
        h
        for h in read_run_headers(StateLayout(state_dir).runs_dir, errors, ticket)
        if (state is None or h["state"] == state) and (ticket is None or h["ticket_id"] == ticket)
    ]
    now = datetime.now(UTC)
    if as_json:
        for raw in headers:
            out.write(json.dumps({k: raw.get(k) for k in (*COLUMNS, "created_at")}) + "\n")
        return 0
    if not headers:
        out.write(f"no runs under {state_dir}\n")
        return 0
    rows = [("RUN", "TICKET", "STATE", "STAGE", "AGE")]
    for raw in headers:
        try:
            age = humanize_age((now - datetime.fromisoformat(raw["updated_at"])).total_seconds())
        except (TypeError, ValueError):
            age = "?"
        rows.append(
            (raw["run_id"], raw["ticket_id"], raw["state"], raw["current_stage"] or "-", age)
        )
    widths = [max(len(str(cell)) for cell in column) for column in zip(*rows, strict=True)]
    out.write(
        "".join(
            "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            + "\n"
            for row in rows
        )
    )
    return 0
