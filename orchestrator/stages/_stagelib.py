"""Plumbing shared by the stage scripts in this directory (it is not a stage itself).

A stage runs as ``python -m orchestrator.stages.<name>`` with the orchestrator's own
interpreter, so the installed package is importable wherever the project was installed.

Everything in a clone was written by someone we do not trust, its ``.git/config`` included:
every repository a stage opens comes from ``open_clone`` (or ``harden``), so each git call
GitPython makes in it runs with the orchestrator's hardening (``orchestrator.execution.git``):
no hooks, fsmonitor, pager, transport or driver the clone names.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import git

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


# GitPython wraps captured output as "\n  stderr: '...'"; peel that off to read git's words.
_WRAPPER = re.compile(r"^\s*std(?:out|err): '(.*)'\s*$", re.DOTALL)
_TELLING = ("fatal:", "error:", "Patch failed")


class StageError(Exception):
    """An expected failure (bad input, git refused): one line on stderr, exit 1."""


def require_env(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise StageError(f"{name} is not set (this script runs under the orchestrator)")
    return value


def _unwrap(captured: object) -> list[str]:
    text = captured.decode(errors="replace") if isinstance(captured, bytes) else str(captured)
    match = _WRAPPER.match(text)
    body = match.group(1) if match else text
    return [line.strip() for line in body.splitlines() if line.strip()]


def git_output_lines(exc: git.GitCommandError) -> list[str]:
    """Everything git said when it failed, stderr first."""
    return _unwrap(exc.stderr) + _unwrap(exc.stdout)


def git_reason(exc: git.GitCommandError) -> str:
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


def open_clone(path: Path, environ: Mapping[str, str]) -> git.Repo:
    """The clone at ``path``, hardened (``harden``). Refused when its ``.git`` is not its
    own directory: a ``gitdir:`` file or a link would point every call elsewhere."""
    problem = clone_git_dir_problem(path)
    if problem is not None:
        raise StageError(f"refusing to work in {path}: {problem}")
    try:
        repo = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise StageError(f"not a git repository: {path}") from None
    return harden(repo, environ)


def harden(repo: git.Repo, environ: Mapping[str, str]) -> git.Repo:
    """``repo``, every git call it makes from now on hardened: the orchestrator's
    settings, the drivers its config names switched off, the user's identity carried
    over from their global config (which the hardening ignores). Refused, and closed,
    when its own config says what only an attacker would (``tampered_config``)."""
    try:
        problem = tampered_config(_listing(repo, OWN_CONFIG_LISTING, hardened_git_env(environ)))
        if problem is not None:
            raise StageError(f"refusing to work in {repo.working_dir}: {problem}")
        entries = _listing(repo, CONFIG_LISTING, listing_env(environ))
    except BaseException:
        repo.close()
        raise
    repo.git.update_environment(**git_env_for(entries, environ))
    return repo


def _listing(
    repo: git.Repo, argv: tuple[str, ...], env: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    try:
        data = repo.git.execute(
            list(argv), env=dict(env), stdout_as_string=False, strip_newline_in_stdout=False
        )
    except git.GitCommandError as exc:
        raise StageError(
            f"cannot list the git config of {repo.working_dir}: {git_reason(exc)}"
        ) from None
    assert isinstance(data, bytes)  # stdout_as_string=False, no extended output
    return parse_config_listing(data)


def transport_env(repo: git.Repo, url: str) -> dict[str, str]:
    """``repo``'s hardened environment for the one command that pushes to (or asks)
    ``url``: its transport allowed, no other."""
    try:
        return allow_protocol_for(repo.git.environment(), url)
    except ValueError as exc:
        raise StageError(str(exc)) from None


def remote_head(repo: git.Repo, url: str, branch: str, env: Mapping[str, str]) -> str | None:
    """The commit ``url`` says its ``refs/heads/<branch>`` is, or None when it has none."""
    ref = f"refs/heads/{branch}"
    listed = str(repo.git.ls_remote(url, ref, env=dict(env)))
    for line in listed.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def confirm_pushed(
    repo: git.Repo, url: str, branch: str, head_sha: str, env: Mapping[str, str], shown: str
) -> None:
    """Raise StageError unless ``url`` (``shown`` in messages) now has ``branch`` at
    ``head_sha``: a push that went somewhere else must not be recorded as a success."""
    found = remote_head(repo, url, branch, env)
    if found != head_sha:
        what = f"it is at {found[:7]}" if found else "it has no such branch"
        raise StageError(
            f"pushed {branch} ({head_sha[:7]}), but {shown} does not have it: {what}; "
            "the push went somewhere else"
        )
