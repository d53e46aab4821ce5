"""Stage ``open-pr`` with the local, offline forge: push the branch, record the PR.

Runs in the clone. Pushes ORCH_WORK_BRANCH to the ticket's repository, named by its URL
(ORCH_REPOSITORY), never by a remote name the clone's config could point elsewhere, and
confirms the branch is there at our head; then writes ``$ORCH_RUN_DIR/pull-request.json``
atomically. Running it again for the same head rewrites the same record, keeping the
first ``created_at``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.forges.base import Forge
from orchestrator.forges.local import LocalForge
from orchestrator.stages._stagelib import (
    GitError,
    StageError,
    git_reason,
    push_work,
    require_env,
    run_stage,
    stage_ticket,
)
from orchestrator.storage._atomic import atomic_write

RECORD_NAME = "pull-request.json"


def read_previous(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or damaged: there is nothing worth keeping
    return data if isinstance(data, dict) else None


def main(environ: Mapping[str, str]) -> None:
    ticket = stage_ticket(environ)
    repository = require_env(environ, "ORCH_REPOSITORY")
    base = require_env(environ, "ORCH_BASE_BRANCH")
    base_ref = require_env(environ, "ORCH_BASE_REF")
    work = require_env(environ, "ORCH_WORK_BRANCH")
    record_path = Path(require_env(environ, "ORCH_RUN_DIR")) / RECORD_NAME

    try:
        head_sha, commits = push_work(environ, repository, work, base_ref)
    except GitError as exc:
        raise StageError(f"cannot push {work} to {repository}: {git_reason(exc)}") from None
    print(f"pushed {work} ({head_sha[:7]}, {len(commits)} commit(s)) to {repository}")

    def save(record: dict[str, Any]) -> None:
        text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
        atomic_write(record_path, text.encode("utf-8"))

    forge: Forge = LocalForge(
        repository=repository,
        head_sha=head_sha,
        commits=commits,
        previous=read_previous(record_path),
        now=datetime.now(UTC).isoformat(timespec="seconds"),
        url=record_path.as_uri(),
        save=save,
    )
    pull = forge.open_pull_request(work, base, ticket.fields.title, ticket.body)
    what = "recorded" if pull.created else "already recorded for this head; refreshed"
    print(f"pull request {what}: {record_path}")


if __name__ == "__main__":
    run_stage("open-pr", main)
