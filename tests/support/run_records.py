"""A run record made for a storage test: a ticket's run started at a given time, with one
stage and paths that need not exist (the tests of listings and look-ups read records, not
runs)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.domain.runs import RunRecord, StageRecord, new_run_id


def run_record(
    ticket_id: str, created: datetime, *, title: str = "", suffix: str = "", **update: Any
) -> RunRecord:
    """``ticket_id``'s run created at ``created``; ``suffix`` replaces its id's last four
    characters (two runs in one second), ``update`` sets any other field."""
    run_id = new_run_id(ticket_id, created)
    if suffix:
        run_id = f"{run_id[:-4]}{suffix}"
    made = RunRecord(
        run_id=run_id, ticket_id=ticket_id, ticket_title=title or f"Fix {ticket_id}",
        ticket_kind="bug", ticket_path=f"/t/{ticket_id}.md", ticket_snapshot="/s/t.md",
        ticket_sha256="0" * 64, repository="/r.git", base_branch="main",
        work_branch=f"orchestrator/{ticket_id}", config_path="/c.toml", config_sha256="0" * 64,
        run_dir=f"/s/runs/{run_id}", clone_dir=f"/s/runs/{run_id}/clone",
        created_at=created, updated_at=created, stages=(StageRecord(name="implement"),),
    )  # fmt: skip
    return made.model_copy(update=update) if update else made


def publish_record(
    url: str,
    root: Path,
    record: RunRecord,
    *,
    fence: tuple[str, int] | None = None,
    before_write: Callable[[Any], None] | None = None,
) -> None:
    """``record`` into the database's ``runs`` table as a PostgreSQL storage's run store
    puts it there: published through ``root``'s state mirror, in one statement, only while
    ``fence`` (ticket, token) is the ticket's lease when given. ``before_write`` is the
    mirror's test seam (called once the fence is checked, before the write)."""
    from orchestrator.storage.postgres import LeaseToken, StateMirror
    from orchestrator.storage.runs import RunStore

    StateMirror(url, root).publish(
        RunStore(root).record_path(record.run_id),
        record.model_dump_json(indent=2).encode(),
        fence=None if fence is None else LeaseToken(*fence),
        _before_write=before_write,
    )
