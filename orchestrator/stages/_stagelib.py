"""Plumbing shared by the stage scripts in this directory (it is not a stage itself).

A stage runs as ``python -m orchestrator.stages.<name>`` with the orchestrator's own
interpreter, so the installed package is importable wherever the project was installed.

Everything in a clone was written by someone we do not trust, its ``.git/config`` included:
every repository a stage opens comes from ``open_clone`` (or ``harden``), so each git call
made in it (``Clone.git``) runs with the orchestrator's hardening (``orchestrator.execution.git``):
no hooks, fsmonitor, pager, transport or driver the clone names. git is run directly, not
through GitPython: importing that costs ~0.1 s of CPU at every start of a stage program.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from orchestrator.execution.git import (
    CONFIG_LISTING,
    OWN_CONFIG_LISTING,
    allow_protocol_for,
    clone_git_dir_problem,
    git_env_for,
    hardened_git_env,
    listing_env,
    parse_config_listing,
    tampered_config,
)

if TYPE_CHECKING:
    from orchestrator.domain.tickets import Ticket


_TELLING = ("fatal:", "error:", "Patch failed")
PushEnv = Callable[[dict[str, str]], dict[str, str]]  # a push's environment, from the clone's


class StageError(Exception):
    """An expected failure (bad input, git refused): one line on stderr, exit 1."""


class GitError(Exception):
    """A git call that failed: its arguments, exit status and what it printed."""

    def __init__(self, argv: tuple[str, ...], status: int, stdout: bytes, stderr: bytes) -> None:
        super().__init__(f"git {' '.join(argv)} exited with status {status}")
        self.argv, self.status, self.stdout, self.stderr = argv, status, stdout, stderr


def run_git(
    argv: tuple[str, ...], cwd: Path | None, env: Mapping[str, str], stdin: bytes = b""
) -> bytes:
    """What ``git <argv>`` in ``cwd`` printed, run with exactly ``env`` and in English
    (git's messages are matched and shown); a failure raises GitError. The one place a
    stage program starts git."""
    try:
        done = subprocess.run(
            ("git", *argv),
            cwd=cwd,
            env={**env, "LANGUAGE": "C", "LC_ALL": "C"},
            input=stdin,
            capture_output=True,
        )
    except OSError as exc:  # no git on PATH, or no ``cwd``: said as git's own failure is
        raise GitError(argv, 127, b"", str(exc).encode()) from exc
    if done.returncode != 0:
        raise GitError(argv, done.returncode, done.stdout, done.stderr)
    return done.stdout


@dataclass
class Clone:
    """A clone, the hardened environment every git call in it runs with (``harden``) and
    its config as (scope, name, value) entries when it was opened."""

    working_dir: Path
    env: dict[str, str]
    config: list[tuple[str, str, str]]

    def git(self, *argv: str, env: Mapping[str, str] | None = None, stdin: bytes = b"") -> str:
        """What git printed, as text without its last newline."""
        out = run_git(argv, self.working_dir, self.env if env is None else env, stdin)
        return out.decode(errors="surrogateescape").removesuffix("\n")

    def commits(self, revisions: str) -> list[tuple[str, str]]:
        """(sha, first line of the message) of each commit in ``revisions``, oldest first."""
        listed = self.git("log", "-z", "--reverse", "--format=%H %B", revisions, "--")
        entries = [entry.partition(" ") for entry in listed.split("\0") if entry]
        return [(sha, message.split("\n", 1)[0]) for sha, _, message in entries]


def require_env(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise StageError(f"{name} is not set (this script runs under the orchestrator)")
    return value


def git_output_lines(exc: GitError) -> list[str]:
    """Everything git said when it failed, stderr first."""
    text = (exc.stderr + b"\n" + exc.stdout).decode(errors="replace")
    return [line.strip() for line in text.splitlines() if line.strip()]


def git_reason(exc: GitError) -> str:
    """git's most telling lines, joined into one line a person can act on."""
    lines = git_output_lines(exc)
    telling = [line for line in lines if line.startswith(_TELLING)]
    if telling:
        return "; ".join(telling[-2:])
    if lines:
        return lines[-1]
    return f"git exited with status {exc.status}"


def run_stage(name: str, main: Callable[[Mapping[str, str]], None]) -> NoReturn:
    """Run ``main(os.environ)``; an expected failure becomes one stderr line and exit 1.
    Anything else propagates with its traceback, because it is a bug in the script."""
    try:
        main(os.environ)
    except StageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


def stage_ticket(environ: Mapping[str, str]) -> Ticket:
    """The run's ticket snapshot; a malformed one is an expected failure, not a traceback."""
    # Imported here: pydantic costs ~100 ms, and the clone stage does not need it.
    from orchestrator.domain.errors import TicketError
    from orchestrator.domain.tickets import load_ticket

    try:
        return load_ticket(Path(require_env(environ, "ORCH_TICKET_FILE")))
    except TicketError as exc:
        raise StageError(str(exc)) from None


def open_clone(path: Path, environ: Mapping[str, str]) -> Clone:
    """The clone at ``path``, hardened (``harden``). Refused when its ``.git`` is not its
    own directory: a ``gitdir:`` file or a link would point every call elsewhere."""
    problem = clone_git_dir_problem(path)
    if problem is not None:
        raise StageError(f"refusing to work in {path}: {problem}")
    return harden(path, environ)


def harden(working_dir: Path, environ: Mapping[str, str]) -> Clone:
    """The clone at ``working_dir``, every git call in it hardened: the orchestrator's
    settings, the drivers its config names switched off, the user's identity carried
    over from their global config (which the hardening ignores). Refused when its own
    config says what only an attacker would (``tampered_config``)."""
    problem = tampered_config(_listing(working_dir, OWN_CONFIG_LISTING, hardened_git_env(environ)))
    if problem is not None:
        raise StageError(f"refusing to work in {working_dir}: {problem}")
    entries = _listing(working_dir, CONFIG_LISTING, listing_env(environ))
    return Clone(working_dir, git_env_for(entries, environ), entries)


def _listing(
    working_dir: Path, argv: tuple[str, ...], env: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    try:
        return parse_config_listing(run_git(argv[1:], working_dir, env))
    except GitError as exc:
        raise StageError(
            f"cannot list the git config of {working_dir}: {git_reason(exc)}"
        ) from None


def push_work(
    environ: Mapping[str, str], url: str, work: str, base_ref: str, env_for: PushEnv = dict
) -> tuple[str, list[tuple[str, str]]]:
    """Push ``work`` of the clone here to ``url`` (its URL, never a remote name the clone's
    config could point elsewhere; ``env_for`` completes the push's environment, its
    transport allowed, no other) and return its head and its commits over ``base_ref``.
    Refused when it has none, or when ``url`` does not then have it at that head: a push
    that went somewhere else must not be recorded as a success. GitError when git fails."""
    repo = open_clone(Path.cwd(), environ)
    try:
        head_sha = repo.git("rev-parse", "--verify", "--quiet", f"refs/heads/{work}^{{commit}}")
    except GitError:
        raise StageError(f"branch {work} does not exist in {repo.working_dir}") from None
    commits = repo.commits(f"{base_ref}..{work}")
    if not commits:
        raise StageError(f"{work} has no commits on top of {base_ref}: nothing to propose")
    try:
        env = env_for(allow_protocol_for(repo.env, url))
    except ValueError as exc:
        raise StageError(str(exc)) from None
    # '+': the branch is the orchestrator's own (orch/<ticket>), so a retry that rebuilt it
    # from the base replaces what an earlier attempt pushed.
    ref = f"refs/heads/{work}"
    repo.git("push", url, f"+{ref}:{ref}", env=env)
    remote = [line.split("\t") for line in repo.git("ls-remote", url, ref, env=env).splitlines()]
    found = next((sha for sha, name in remote if name == ref), None)
    if found != head_sha:
        what = f"it is at {found[:7]}" if found else "it has no such branch"
        raise StageError(
            f"pushed {work} ({head_sha[:7]}), but {url} does not have it: {what}; "
            "the push went somewhere else"
        )
    return head_sha, commits
