"""The workspace around a coding engine, run in the clone before and after it.

    python stages/engine_workspace.py prepare   reset the work branch to its base, clean:
                                                 a retry starts from where the first did
    python stages/engine_workspace.py commit    commit what the engine changed: the
                                                 orchestrator owns the commits

Only the project's changes are committed (``domain/engine_files.py``): an engine's own
new files (aider's ``.aider*``) and the lines it added to an ignore file to hide them are
left out. The step prints what it committed and left out as its last line, which the
orchestrator reads into the attempt's record.

On a bug-fix ticket the work is committed in two steps — production code first, then the
test-only changes — so the fix lands before the test that pins it (the order
``lint-bug-commit-order`` checks). Otherwise one commit, titled after the ticket.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.engine_files import (
    WorkspaceSummary,
    engine_own,
    is_ignore_file,
    kept_ignore_change,
    left_out_name,
    summarise,
    summary_line,
)
from orchestrator.domain.inert import forge_line
from orchestrator.stages._stagelib import (
    Clone,
    GitError,
    StageError,
    open_clone,
    require_env,
    run_git,
    run_stage,
    stage_ticket,
)
from orchestrator.stages.checks.commit_order import classify_path
from orchestrator.stages.implement_patch import reset_to_base


@dataclass(frozen=True)
class Change:
    """One path the engine changed, as ``git status`` names it, and what is committed of
    it: ``content`` None stages the file as it is in the work tree; else those bytes (an
    ignore file without the engine's own lines)."""

    path: str
    content: bytes | None = None


def worked_paths(repo: Clone, base: str = "HEAD") -> tuple[list[tuple[str, bool]], list[str]]:
    """What the engine changed against ``base``, each path with whether ``base`` holds it,
    and the new files the clone's ignore rules hide that are named as an engine's own
    (listed as left out: with an engine's line in ``.gitignore``, its files are hidden).
    The branch and the index are reset to ``base`` first, the work tree kept: what the
    engine staged or committed itself is no choice of ours."""
    repo.git("reset", "-q", base, "--")
    changed = [
        (entry[3:], entry[:2] != "??")
        for entry in _entries(repo, "--untracked-files=all", "--no-renames")
    ]
    hidden = _entries(repo, "--ignored=matching", "--untracked-files=normal")
    ignored = [entry[3:] for entry in hidden if entry.startswith("!! ")]
    return changed, [p for p in ignored if engine_own(p.rstrip("/"), tracked=False)]


def _entries(repo: Clone, *options: str) -> list[str]:
    """``git status -z``'s entries, each name as the file system has it (a name that is
    not UTF-8 keeps its bytes, as ``os.fsdecode`` does)."""
    listing = run_git(("status", "--porcelain=v1", "-z", *options), repo.working_dir, repo.env)
    return [os.fsdecode(entry) for entry in listing.split(b"\0") if entry]


def decide(repo: Clone, base: str = "HEAD") -> tuple[list[Change], list[str]]:
    """What of the engine's work is committed, and what is left out as the engine's own
    (``domain/engine_files.py``)."""
    changed, hidden_own = worked_paths(repo, base)
    kept: list[Change] = []
    left_out = [left_out_name(path) for path in hidden_own]
    for path, tracked in changed:
        if engine_own(path, tracked=tracked):
            left_out.append(left_out_name(path))
        elif is_ignore_file(path) and (text := _regular_text(repo, path)) is not None:
            before = _base_text(repo, path) if tracked else None
            content = kept_ignore_change(before, text)
            if content is None:
                left_out.append(path)
            elif content != text:
                kept.append(Change(path, content.encode("utf-8")))
                left_out.append(path)  # committed, without the engine's lines
            else:
                kept.append(Change(path))
        else:
            kept.append(Change(path))
    return kept, sorted(dict.fromkeys(left_out))


def _regular_text(repo: Clone, path: str) -> str | None:
    """The work tree's file at ``path`` as text; None for a link, a deleted file or one
    that is not UTF-8 (committed as it is)."""
    full = repo.working_dir / path
    try:
        if not stat.S_ISREG(full.lstat().st_mode):
            return None
        return full.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _base_text(repo: Clone, path: str) -> str | None:
    try:
        mode = repo.git("ls-tree", "HEAD", "--", path).split(" ", 1)[0]
        if mode not in ("100644", "100755"):
            return None
        blob = run_git(("cat-file", "blob", f"HEAD:{path}"), repo.working_dir, repo.env)
        return blob.decode("utf-8")
    except (GitError, UnicodeDecodeError):
        return None


def stage(repo: Clone, changes: list[Change]) -> None:
    """Stage exactly ``changes``: a path as the work tree has it (a deletion included),
    or the bytes chosen for it."""
    as_is = [c.path for c in changes if c.content is None]
    for start in range(0, len(as_is), 500):
        repo.git("add", "-A", "--", *as_is[start : start + 500])
    for change in changes:
        if change.content is None:
            continue
        sha = repo.git("hash-object", "-w", "--no-filters", "--stdin", stdin=change.content)
        executable = os.access(repo.working_dir / change.path, os.X_OK)
        mode = "100755" if executable else "100644"
        repo.git("update-index", "--add", "--cacheinfo", f"{mode},{sha},{change.path}")


def commit(
    repo: Clone, title: str, kind: str, base: str | None = None
) -> tuple[list[str], WorkspaceSummary]:
    """Commit the project's part of the engine's work on top of ``base`` (where the
    attempt started; default ``HEAD``); returns the subjects of the commits made and what
    was committed and left out. Commits the engine made itself are folded in: their
    changes are judged and committed like the rest."""
    # Every path below is a name, never a pattern: ``*.py`` is the file named so.
    repo.env["GIT_LITERAL_PATHSPECS"] = "1"
    start = "HEAD"
    if base is not None:
        start = repo.git("rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}")
        own = repo.git("rev-list", "--count", f"{start}..HEAD")
        if own != "0":
            print(f"the engine made {own} commit(s) itself: its changes are committed anew")
    kept, left_out = decide(repo, start)
    summary = summarise(sorted(c.path for c in kept), left_out)
    if not kept:
        print("nothing to commit: the engine changed no file of the project")
        return [], summary
    if kind != "bug-fix":
        stage(repo, kept)
        repo.git("commit", "-m", title)
        return [title], summary
    tests = [c for c in kept if classify_path(c.path) == "test"]
    production = [c for c in kept if c not in tests]
    made = []
    for changes, subject in ((production, f"fix: {title}"), (tests, f"test: {title}")):
        if changes:
            stage(repo, changes)
            repo.git("commit", "-m", subject)
            made.append(subject)
    return made, summary


def main(environ: Mapping[str, str]) -> None:
    import sys

    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    ticket = stage_ticket(environ)
    repo = open_clone(Path.cwd(), environ)
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
        made, summary = commit(
            repo, subject_line, ticket.fields.kind.value, environ.get("ORCH_BASE_REF")
        )
        for subject in made:
            print(f"committed: {subject}")
        for path in summary.left_out:
            print(f"left out (the engine's own): {path!r}")
        # Last: the orchestrator reads it from what this step printed.
        print(summary_line(summary), flush=True)
    else:
        raise StageError(f"usage: engine_workspace.py prepare|commit (got {mode!r})")


if __name__ == "__main__":
    run_stage("engine-workspace", main)
