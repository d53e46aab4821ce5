"""Build real git repositories in a test's tmp dir, with GitPython (no shell)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import git

USER_NAME = "Test Author"
USER_EMAIL = "test@example.invalid"
ACTOR = git.Actor(USER_NAME, USER_EMAIL)


def set_identity(repo: git.Repo) -> git.Repo:
    # Local config, so commits (and `git am` in a clone) work whatever the machine has.
    with repo.config_writer("repository") as writer:
        writer.set_value("user", "name", USER_NAME)
        writer.set_value("user", "email", USER_EMAIL)
    return repo


def init_repo(path: Path, branch: str = "main") -> git.Repo:
    return set_identity(git.Repo.init(path, initial_branch=branch))


def commit_files(repo: git.Repo, files: Mapping[str, str | None], message: str) -> str:
    """Write (or, for ``None``, delete) ``files`` and commit them; return the new sha."""
    added, removed = [], []
    for rel, text in files.items():
        target = Path(repo.working_dir, rel)
        if text is None:
            removed.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        added.append(rel)
    if added:
        repo.index.add(added)
    if removed:
        repo.index.remove(removed, working_tree=True)
    return repo.index.commit(message, author=ACTOR, committer=ACTOR).hexsha


def bare_clone(source: Path, dest: Path) -> Path:
    git.Repo.clone_from(source, dest, bare=True).close()
    return dest


def clone(origin: Path, dest: Path, branch: str | None = None) -> git.Repo:
    """A working clone of ``origin`` with an identity; on a new ``branch`` if given."""
    repo = set_identity(git.Repo.clone_from(origin, dest))
    if branch:
        repo.git.checkout("-b", branch)
    return repo


def origin_and_clone(tmp: Path, files: Mapping[str, str], branch: str = "fix") -> git.Repo:
    """The usual shape for a check: origin with one commit on main, and a clone of it on a
    work branch, so ``origin/main..HEAD`` is whatever the test commits next."""
    seed = init_repo(tmp / "seed")
    commit_files(seed, files, "initial commit")
    origin = bare_clone(tmp / "seed", tmp / "origin.git")
    return clone(origin, tmp / "clone", branch=branch)
