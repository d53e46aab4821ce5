"""The workspace around a coding engine, run in the clone before and after it.

    python stages/engine_workspace.py prepare   reset the work branch to its base, clean:
                                                 a retry starts from where the first did
    python stages/engine_workspace.py commit    commit what the engine changed: the
                                                 orchestrator owns the commits

On a bug-fix ticket the work is committed in two steps — production code first, then the
test-only changes — so the fix lands before the test that pins it (the order
``lint-bug-commit-order`` checks). Otherwise one commit, titled after the ticket.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import git

from orchestrator.domain.inert import forge_line
from orchestrator.stages._stagelib import (
    StageError,
    open_clone,
    require_env,
    run_stage,
    stage_ticket,
)
from orchestrator.stages.checks.commit_order import classify_path
from orchestrator.stages.implement_patch import reset_to_base


def changed_paths(repo: git.Repo) -> list[str]:
    """Everything the engine touched: modified, deleted and new (untracked) files."""
    repo.git.add("-A")
    return sorted({d.a_path or d.b_path for d in repo.index.diff("HEAD")} - {None})  # type: ignore[arg-type]


def commit(repo: git.Repo, title: str, kind: str) -> list[str]:
    """Commit the staged work; returns the subjects of the commits made."""
    paths = changed_paths(repo)
    if not paths:
        print("nothing to commit: the engine changed no file")
        return []
    if kind != "bug-fix":
        repo.git.commit("-m", title)
        return [title]
    tests = [p for p in paths if classify_path(p) == "test"]
    production = [p for p in paths if p not in tests]
    made = []
    if production:
        if tests:  # unstage the tests: they go in the second commit
            repo.git.reset("-q", "--", *tests)
        repo.git.commit("-m", f"fix: {title}")
        made.append(f"fix: {title}")
    if tests:
        repo.git.add("--", *tests)
        repo.git.commit("-m", f"test: {title}")
        made.append(f"test: {title}")
    return made


def main(environ: Mapping[str, str]) -> None:
    import sys

    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    ticket = stage_ticket(environ)
    with open_clone(Path.cwd(), environ) as repo:
        if mode == "prepare":
            reset_to_base(
                repo,
                require_env(environ, "ORCH_WORK_BRANCH"),
                require_env(environ, "ORCH_BASE_REF"),
            )
            print(f"workspace reset to {environ['ORCH_BASE_REF']}")
        elif mode == "commit":
            # A commit's message closes issues when merged: the title's keywords may not.
            subject_line = forge_line(ticket.fields.title)
            for subject in commit(repo, subject_line, ticket.fields.kind.value):
                print(f"committed: {subject}")
        else:
            raise StageError(f"usage: engine_workspace.py prepare|commit (got {mode!r})")


if __name__ == "__main__":
    run_stage("engine-workspace", main)
