"""What the forge stages' tests share: the workspace an ``open-pr`` stage runs in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.execution.stage_env import StageContext, stage_environ

from conftest import write_ticket
from support.gitrepo import bare_clone, clone, commit_files, init_repo


def stage_workspace(tmp_path: Path) -> dict[str, Any]:
    """A bare origin with main, and a clone on orch/T-1 with a fix on top: what the
    clone and implement stages leave behind."""
    seed = init_repo(tmp_path / "seed")
    commit_files(seed, {"cards/deck.py": "def deal(n):\n    return list(range(n - 1))\n"}, "start")
    origin = bare_clone(tmp_path / "seed", tmp_path / "origin.git")
    work = clone(origin, tmp_path / "run" / "clone", branch="orch/T-1")
    sha = commit_files(work, {"cards/deck.py": "def deal(n):\n    return list(range(n))\n"}, "Fix deal()")  # fmt: skip
    ticket = write_ticket(tmp_path / "run" / "ticket", "T-1", body="deal(5) hands out four cards.")
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True)
    ctx = StageContext(
        ticket_file=ticket,
        ticket_id="T-1",
        ticket_kind="feature",
        repository="https://github.com/octo/cards.git",
        base_branch="main",
        run_id="T-1-20260105T100000Z-ab12",
        run_dir=tmp_path / "run",
        clone_dir=tmp_path / "run" / "clone",
        state_dir=state,
        stage="open-pr",
        engine="",
        model="",
        attempt=4,
    )
    environ = stage_environ({"PATH": "/usr/bin:/bin"}, ctx)
    return {"environ": environ, "origin": origin, "sha": sha, "ctx": ctx}
