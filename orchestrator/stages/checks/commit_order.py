"""Review check ``lint-bug-commit-order``: on a bug-fix ticket the fix lands before its test.

Run inside a clone: ``python -m orchestrator.stages.checks.commit_order [--base REF] [--kind KIND]``
(``bash scripts/dev.sh lint-bug-commit-order`` does exactly that).

The rule, over the commits in ``BASE..HEAD`` oldest first:
  * each commit touches production code only, or tests only — never both;
  * the first commit that touches production code precedes the first test-only commit,
    so the fix is shown to move the bug before a test is written to pin it.

Exit codes: 0 pass (or the rule does not apply to the ticket's kind), 1 violations,
2 the check cannot run here (not a repository, unknown base ref, unknown ticket kind).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Literal

from orchestrator.execution.git import hardened_git_env
from orchestrator.stages._stagelib import Clone, GitError, StageError, harden, run_git

CHECK_NAME = "lint-bug-commit-order"
APPLIES_TO_KIND = "bug-fix"
DEFAULT_BASE_REF = "origin/main"
TEST_DIRS = frozenset({"tests", "test"})
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "conftest.py")

PathKind = Literal["test", "production"]


@dataclass(frozen=True)
class CommitFiles:
    """One commit as the rule sees it: who it is, and which paths it changed."""

    sha: str
    subject: str
    paths: tuple[str, ...]

    @property
    def label(self) -> str:
        return f'{self.sha[:7]} "{self.subject}"'


class SetupError(Exception):
    """The check cannot judge this repository at all (exit 2, which is not a verdict)."""


def classify_path(path: str) -> PathKind:
    """``test`` if a directory on the path is tests/test or the file is named like a test."""
    parts = PurePosixPath(path).parts
    if not parts:
        return "production"
    if any(part in TEST_DIRS for part in parts[:-1]):
        return "test"
    name = parts[-1]
    if any(fnmatchcase(name, pattern) for pattern in TEST_FILE_PATTERNS):
        return "test"
    return "production"


def commit_kinds(commit: CommitFiles) -> frozenset[PathKind]:
    return frozenset(classify_path(p) for p in commit.paths)


def find_violations(commits: Sequence[CommitFiles]) -> list[str]:
    """Every way ``commits`` (oldest first) break the rule, one line each; empty if none."""
    if not commits:
        return ["no commits on the branch: a bug fix needs at least the commit that fixes it"]
    violations = []
    first_production: int | None = None
    first_test_only: int | None = None
    for index, commit in enumerate(commits):
        kinds = commit_kinds(commit)
        if kinds == {"test", "production"}:
            violations.append(
                f"{commit.label}: touches both production code and tests; "
                "split it so the fix lands first and the test after it"
            )
        # A mixed commit does change production code; it is already reported above, so
        # counting it here avoids a second, redundant complaint about the same commit.
        if "production" in kinds and first_production is None:
            first_production = index
        if kinds == {"test"} and first_test_only is None:
            first_test_only = index
    if first_test_only is not None and (
        first_production is None or first_test_only < first_production
    ):
        test_commit = commits[first_test_only]
        where = (
            "no commit on the branch changes production code"
            if first_production is None
            else f"it lands before the first production-code commit "
            f"{commits[first_production].label}"
        )
        violations.append(
            f"{test_commit.label}: test-only commit, but {where}; the fix must come first"
        )
    return violations


def _changed_paths(repo: Clone, sha: str, first_parent: str) -> tuple[str, ...]:
    # Against the first parent: for a merge that is what the branch brought in. A root
    # commit (no parent) is compared with the empty tree. Both sides of a rename are kept,
    # so moving a file into or out of tests/ counts as touching both places.
    against = (first_parent, sha) if first_parent else ("--root", sha)
    listed = repo.git(
        "diff-tree", "-r", "--no-commit-id", "--name-only", "--no-renames", "-z", *against
    )
    return tuple(sorted({p for p in listed.split("\0") if p}))


def read_branch_commits(
    repo_dir: Path, base_ref: str, environ: Mapping[str, str] = os.environ
) -> list[CommitFiles]:
    """The commits in ``base_ref..HEAD`` of the repository at ``repo_dir``, oldest first,
    read with git hardened (a clone whose config says what only an attacker would is
    refused). ``repo_dir`` may be a linked checkout: the verifier runs this check in one."""
    try:
        run_git(("rev-parse", "--git-dir"), repo_dir, hardened_git_env(environ))
    except (GitError, OSError):
        raise SetupError(f"not inside a git repository: {repo_dir}") from None
    try:
        repo = harden(repo_dir, environ)
    except StageError as exc:
        raise SetupError(str(exc)) from None
    for ref, what in ((base_ref, "base ref"), ("HEAD", "HEAD")):
        try:
            repo.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except GitError:
            raise SetupError(f"{what} {ref!r} does not name a commit in {repo_dir}") from None
    listed = repo.git("rev-list", "--parents", f"{base_ref}..HEAD", "--").splitlines()
    parents = dict(line.partition(" ")[::2] for line in listed)  # sha -> its parents
    return [
        CommitFiles(sha, subject, _changed_paths(repo, sha, parents[sha].partition(" ")[0]))
        for sha, subject in repo.commits(f"{base_ref}..HEAD")
    ]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=CHECK_NAME, description="On a bug-fix ticket, the fix lands before its test."
    )
    parser.add_argument("--base", help="base ref (default: $ORCH_BASE_REF, else origin/main)")
    parser.add_argument("--kind", help="ticket kind (default: $ORCH_TICKET_KIND)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    kind: str = args.kind or os.environ.get("ORCH_TICKET_KIND", "")
    base: str = args.base or os.environ.get("ORCH_BASE_REF", "") or DEFAULT_BASE_REF
    if not kind:
        # Refuse rather than skip: a verifier re-running this check without the stage's
        # environment must not read a vacuous "skipped" as a pass.
        print(
            f"{CHECK_NAME}: ticket kind unknown (set ORCH_TICKET_KIND or pass --kind)",
            file=sys.stderr,
        )
        return 2
    if kind != APPLIES_TO_KIND:
        print(f"{CHECK_NAME}: skipped (ticket kind is {kind}, rule applies to {APPLIES_TO_KIND})")
        return 0
    try:
        commits = read_branch_commits(Path.cwd(), base)
    except SetupError as exc:
        print(f"{CHECK_NAME}: {exc}", file=sys.stderr)
        return 2
    violations = find_violations(commits)
    if violations:
        for line in violations:
            print(line)
        print(f"{CHECK_NAME}: FAILED ({len(violations)} violation(s))")
        return 1
    print(f"{CHECK_NAME}: OK ({len(commits)} commits)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
