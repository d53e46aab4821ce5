"""Stage ``implement`` with the offline ``patch`` engine: apply the ticket's patch file.

Runs in the clone. The ticket (ORCH_TICKET_FILE) names the patch in ``[extras.patch]
file``, relative to the ticket. An mbox series (``git format-patch`` output) is applied
with ``git am``, keeping each commit's author and message; a plain diff is applied to the
index and committed with the ticket's title. Every attempt starts from ORCH_BASE_REF, so a
retry applies the same patch to the same tree and yields the same commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.domain.inert import forge_line
from orchestrator.domain.tickets import PatchExtras, Ticket
from orchestrator.stages._stagelib import (
    Clone,
    GitError,
    StageError,
    git_output_lines,
    git_reason,
    open_clone,
    require_env,
    run_stage,
    stage_ticket,
)

MBOX_MAGIC = b"From "


def is_mbox(head: bytes) -> bool:
    """``git format-patch`` output starts every message with a ``From <sha> <date>`` line."""
    return head.startswith(MBOX_MAGIC)


def patch_path(ticket: Ticket) -> Path:
    table = ticket.fields.extras.get("patch")
    if table is None:
        raise StageError(f"ticket {ticket.id} has no [extras.patch] table naming a patch file")
    return (ticket.path.parent / PatchExtras.model_validate(table).file).resolve()


def reset_to_base(repo: Clone, work: str, base_ref: str) -> None:
    """Put ``work`` back at ``base_ref`` with a pristine tree, whatever an earlier attempt
    left behind (a half-applied series, staged files, untracked or ignored files)."""
    if (repo.working_dir / ".git" / "rebase-apply").exists():  # open_clone: .git is its own
        repo.git("am", "--abort")
    repo.git("checkout", "-f", "-B", work, "--no-track", base_ref)
    repo.git("clean", "-fdx")


def apply_series(repo: Clone, patch: Path) -> None:
    try:
        repo.git("am", str(patch))
    except GitError as exc:
        for line in git_output_lines(exc):
            print(f"  git: {line}")
        # Leave no am session behind: the next attempt (or a human) starts from clean.
        repo.git("am", "--abort")
        raise StageError(f"{patch.name} does not apply: {git_reason(exc)}") from None


def apply_diff(repo: Clone, patch: Path, message: str) -> None:
    try:
        repo.git("apply", "--index", str(patch))  # all or nothing: a failure changes no file
    except GitError as exc:
        raise StageError(f"{patch.name} does not apply: {git_reason(exc)}") from None
    if not repo.git("diff", "--cached", "--name-only", "HEAD", "--"):
        raise StageError(f"{patch.name} changes nothing")
    repo.git("commit", "-m", message)


def main(environ: Mapping[str, str]) -> None:
    ticket = stage_ticket(environ)
    base_ref = require_env(environ, "ORCH_BASE_REF")
    work = require_env(environ, "ORCH_WORK_BRANCH")
    patch = patch_path(ticket)
    try:
        with patch.open("rb") as fh:
            head = fh.read(len(MBOX_MAGIC))
    except OSError as exc:
        raise StageError(f"cannot read patch {patch}: {exc.strerror}") from None

    repo = open_clone(Path.cwd(), environ)
    reset_to_base(repo, work, base_ref)
    print(f"reset {work} to {base_ref} ({repo.git('rev-parse', 'HEAD')[:7]})")
    if is_mbox(head):
        print(f"applying the commit series in {patch.name} with git am")
        apply_series(repo, patch)
    else:
        print(f"applying the diff in {patch.name} and committing it as the ticket title")
        # A commit's message closes issues when merged: the title's keywords may not.
        apply_diff(repo, patch, forge_line(ticket.fields.title))
    commits = repo.commits(f"{base_ref}..HEAD")
    print(f"{len(commits)} commit(s) on {work}:")
    for sha, summary in commits:
        print(f"  {sha[:7]} {summary}")


if __name__ == "__main__":
    run_stage("implement", main)
