"""Stage ``clone``: a fresh clone of the ticket's repository, on a new work branch.

Runs in the run directory. Reads ORCH_REPOSITORY, ORCH_CLONE_DIR, ORCH_BASE_BRANCH and
ORCH_WORK_BRANCH (orchestrator/execution/stage_env.py). Exit 0 done; 1 with one line on stderr.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from orchestrator.domain.git_identity import FALLBACK_IDENTITY, configured_identity
from orchestrator.execution.git import protocol_of
from orchestrator.stages._stagelib import (
    Clone,
    GitError,
    StageError,
    git_reason,
    open_clone,
    require_env,
    run_git,
    run_stage,
)


def remove_leftover(path: Path) -> bool:
    """Clear what an interrupted earlier attempt left at ``path``; True if anything was."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return True
    if path.exists():
        shutil.rmtree(path)
        return True
    return False


def missing_identity(repo: Clone, configured: Mapping[str, str] = {}) -> dict[str, str]:
    """The user.* values for keys neither the user's global git config nor the clone's
    sets: the configured ones (``[git]`` in config.toml), else the fallback's."""
    values = {name.lower(): value for _, name, value in repo.config}  # the last one wins
    return {
        key: configured.get(key) or value
        for key, value in FALLBACK_IDENTITY.items()
        if not values.get(f"user.{key}")
    }


def clone_environment(environ: Mapping[str, str], repository: str) -> dict[str, str]:
    """The environment of the one ``git clone``: the user's own git config applies (no
    clone exists yet, so all git reads is theirs: credential helpers, ssh, LFS), but git
    may use the transport of the ticket's repository and no other. The ticket was written
    by someone we do not trust, and ``ext::`` runs a command. GIT_ALLOW_PROTOCOL replaces
    every protocol.* setting, whatever config says."""
    protocol = protocol_of(repository)
    if protocol is None:
        raise StageError(
            f"cannot clone {repository}: not an absolute path, nor a file, git, http(s) or ssh URL"
        )
    return {**environ, "GIT_ALLOW_PROTOCOL": protocol, "GIT_NO_LAZY_FETCH": "1"}


def main(environ: Mapping[str, str]) -> None:
    repository = require_env(environ, "ORCH_REPOSITORY")
    clone_dir = Path(require_env(environ, "ORCH_CLONE_DIR"))
    base = require_env(environ, "ORCH_BASE_BRANCH")
    work = require_env(environ, "ORCH_WORK_BRANCH")

    env = clone_environment(environ, repository)
    if remove_leftover(clone_dir):
        print(f"removed the clone left by an earlier attempt: {clone_dir}")
    try:
        run_git(("clone", "-v", "--", repository, str(clone_dir)), None, env)
    except GitError as exc:
        raise StageError(f"cannot clone {repository}: {git_reason(exc)}") from None
    repo = open_clone(clone_dir, environ)
    print(f"cloned {repository} into {clone_dir}")
    remote = repo.git("for-each-ref", "--format=%(refname)", "refs/remotes/origin/").split("\n")
    if f"refs/remotes/origin/{base}" not in remote:
        raise StageError(f"base branch {base!r} does not exist in {repository}")
    # --no-track: the work branch must never push to (or pull from) the base branch.
    repo.git("checkout", "-B", work, "--no-track", f"origin/{base}")
    print(f"on new branch {work} from origin/{base} at {repo.git('rev-parse', 'HEAD')[:7]}")
    configured = configured_identity(environ)
    identity = missing_identity(repo, configured)
    if identity:
        for key, value in identity.items():
            repo.git("config", f"user.{key}", value)
        shown = ", ".join(f"user.{key}={value}" for key, value in identity.items())
        source = "from [git] in config.toml" if configured else "the fallback identity"
        print(f"no git identity configured in git; set {shown} in this clone ({source})")


if __name__ == "__main__":
    run_stage("clone", main)
