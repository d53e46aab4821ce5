"""What the ``open-pr`` stages of every hosted forge share (it is not a stage itself):
push the work branch with the token handed to git by a credential helper, collect the
run's decisions for the description, record the pull (merge) request, and turn failures
into one line, an exit code and, for infrastructure, a ``::failure-class::`` marker.

The token is never put where it could leak: git gets it from a credential helper that
reads it from the push's own environment — not from argv (which every user sees in
``ps``), not from a remote URL or ``.git/config``, and so not from an error text that
quotes the command line; the API gets it in a request header only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx2

from orchestrator.domain.held_secrets import held_values
from orchestrator.domain.inert import forge_line
from orchestrator.domain.tickets import Ticket, remote_repository_problem
from orchestrator.execution.git import overriding
from orchestrator.forges.base import Forge, ForgeError, PullRequest
from orchestrator.forges.github import pr_body
from orchestrator.forges.http import MAX_WAIT_S
from orchestrator.reading.signs import FAILURE_MARKER
from orchestrator.redaction import HeldSecrets, redact
from orchestrator.stages._stagelib import (
    GitError,
    StageError,
    git_reason,
    push_work,
    require_env,
    stage_ticket,
)
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import StateLayout, verdict_files

RECORD_NAME = "pull-request.json"
EXIT_REFUSED = 3
EXIT_UNAVAILABLE = 4
HTTP_TIMEOUT_S = 30.0
_UNAVAILABLE = frozenset({"outage", "rate_limited"})

ClientFactory = Callable[[str], httpx2.Client]


def default_client(base_url: str) -> httpx2.Client:
    return httpx2.Client(base_url=base_url, timeout=HTTP_TIMEOUT_S)


# The forge's answers that are about access or availability, not about the change: a 404
# (wrong repository) or a 422 (the forge refused this request) go to recovery as usual.
FORGE_FAILURE_CLASS = {
    "auth": "auth_error",
    "forbidden": "auth_error",
    "rate_limited": "rate_limited",
    "outage": "outage",
}


class NotConfigured(StageError):
    """What the machine lacks, not the change (a missing token): no model can fix it, and
    retrying cannot either; a person sets it and resumes."""


@dataclass(frozen=True)
class Credentials:
    """How git authenticates a push over https: ``username`` and the token, which the
    helper reads from ``$<token_env>`` in the push's environment."""

    token_env: str  # GITHUB_TOKEN, GITLAB_TOKEN
    username: str  # what the forge expects beside a token: x-access-token, oauth2
    token: str

    def __repr__(self) -> str:
        return f"Credentials(token_env={self.token_env!r}, username={self.username!r})"


def credential_helper(token_env: str, username: str) -> str:
    """git runs this with the action as $1; only "get" is answered, so nothing is stored."""
    return (
        f'!f() {{ test "$1" = get || return 0; echo username={username}; '
        f'echo "password=${token_env}"; }}; f'
    )


def push_environment(credentials: Credentials, git_env: Mapping[str, str] | None) -> dict[str, str]:
    """Environment for ``git push``: ``git_env`` (the clone's hardened one, its push
    transport allowed) with our helper after every setting in it, replacing any configured
    one (a user's credential store must neither answer nor keep this token), and git may
    not stop to ask a terminal for a password."""
    base = {**(git_env or {}), credentials.token_env: credentials.token, "GIT_TERMINAL_PROMPT": "0"}
    helper = credential_helper(credentials.token_env, credentials.username)
    # Any helper configured before is dropped (the empty value), then ours answers.
    return overriding(base, (("credential.helper", ""), ("credential.helper", helper)))


# What git says when the forge refuses the push or cannot be reached (git's and the
# forges' own wording; the URL in it carries no credentials: we never put them there).
_PUSH_FAILURES = (
    # A rate limit first: its 403 or 429 says the forge did not act (issue 43).
    ("rate_limited", re.compile(r"returned error: 429|rate[ -]?limit", re.IGNORECASE)),
    ("auth", re.compile(r"authentication failed|could not read (?:username|password)|"
                        r"invalid username or (?:password|token)|HTTP Basic: Access denied",
                        re.IGNORECASE)),
    ("forbidden", re.compile(r"returned error: 403|permission to \S+ denied|"
                             r"write access to repository not granted|"
                             r"not allowed to push code", re.IGNORECASE)),
    ("outage", re.compile(r"could not resolve host|failed to connect|connection (?:refused|"
                          r"reset|timed out)|returned error: 5\d\d|remote end hung up|"
                          r"operation timed out", re.IGNORECASE)),
)  # fmt: skip


def push_failure_kind(reason: str) -> str | None:
    """The forge error kind a failed push amounts to, or None (a plain stage failure)."""
    for kind, pattern in _PUSH_FAILURES:
        if pattern.search(reason):
            return kind
    return None


def verdict_summaries(state_dir: Path, run_id: str) -> list[str]:
    """``<action>: <summary>`` of each of the run's decisions, in decision order."""
    summaries = []
    for found in verdict_files(StateLayout(state_dir).runs_dir, run_id=run_id):
        path = found.path
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            print(f"note: {path} is unreadable; its decision is left out of the PR body")
            continue
        verdict = record.get("verdict") if isinstance(record, dict) else None
        summary = verdict.get("summary") if isinstance(verdict, dict) else None
        if isinstance(summary, str) and summary.strip():
            action = record.get("action")
            summaries.append(f"{action}: {summary}" if isinstance(action, str) else summary)
    return summaries


# The word each forge closes an issue by when the request is merged.
_PROJECT = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+")
_CLOSING_WORD = {"github": "Fixes", "gitlab": "Closes"}


def closing_reference(ticket: Ticket, project: str, *, forge: str) -> str:
    """``Fixes #N`` (GitHub) or ``Closes #N`` (GitLab) when the ticket came from an issue
    on this forge (``owner/x#N`` for an issue of another repository); '' otherwise."""
    origin = ticket.fields.origin
    if origin is None or origin.kind != forge:
        return ""
    where = "" if origin.project == project else origin.project
    if where and not _PROJECT.fullmatch(where):
        return ""  # a name that is not one could smuggle a second keyword into the line
    return f"{_CLOSING_WORD[forge]} {where}#{origin.number}"


@dataclass(frozen=True)
class OpenPrRun:
    """What an ``open-pr`` stage is handed under the ORCH_* contract."""

    ticket: Ticket
    repository: str
    base: str
    base_ref: str
    work: str
    run_id: str
    run_dir: Path
    state_dir: Path

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> OpenPrRun:
        return cls(
            ticket=stage_ticket(environ),
            repository=require_env(environ, "ORCH_REPOSITORY"),
            base=require_env(environ, "ORCH_BASE_BRANCH"),
            base_ref=require_env(environ, "ORCH_BASE_REF"),
            work=require_env(environ, "ORCH_WORK_BRANCH"),
            run_id=require_env(environ, "ORCH_RUN_ID"),
            run_dir=Path(require_env(environ, "ORCH_RUN_DIR")),
            state_dir=Path(require_env(environ, "ORCH_STATE_DIR")),
        )

    @property
    def title(self) -> str:
        """The ticket's title as the request's: one line, closing no issue and mentioning
        nobody (``domain/inert.py``)."""
        return forge_line(self.ticket.fields.title)

    def description(self) -> str:
        """The ticket, then what the run decided on the way (``forges.github.pr_body``)."""
        summaries = verdict_summaries(self.state_dir, self.run_id)
        body = pr_body(self.ticket.body, summaries, self.run_id)
        # It is posted: no secret's shape, and none of this stage's own (its forge token,
        # whatever its pass_env hands it) in any form (redaction/held.py).
        return redact(body, held=HeldSecrets(held_values(os.environ)))

    def open_on(self, forge: Forge, *, name: str, project: str, sha: str, shown: str) -> None:
        """Open (or reuse) the request, its description closing the ticket's issue, record
        it in ``$ORCH_RUN_DIR/pull-request.json`` and say so (``shown``: its number's prefix)."""
        body = self.description()
        closes = closing_reference(self.ticket, project, forge=name)
        if closes:
            body += f"\n{closes}\n"
        pull = forge.open_pull_request(head=self.work, base=self.base, title=self.title, body=body)
        data = record(pull, forge=name, repo=project, head=self.work, base=self.base,
                      title=self.title, sha=sha)  # fmt: skip
        atomic_write(self.run_dir / RECORD_NAME, data)
        verb = "opened" if pull.created else "reused the open"
        print(f"{verb} {shown}{pull.number}: {pull.url}")


def forge_repository(
    environ: Mapping[str, str], override: str, parse: Callable[[str], str], form: str
) -> str:
    """The forge's name for the ticket's repository: ``$<override>`` when set, else parsed
    from its URL; a URL that names none says which variable to set."""
    named = environ.get(override, "")
    if named:
        return named
    try:
        return parse(require_env(environ, "ORCH_REPOSITORY"))
    except ValueError as exc:
        raise StageError(f"{exc}; set {override}={form}") from None


@dataclass(frozen=True)
class ForgeTarget:
    """Where a request is opened: the forge's name for the project, its API, and where
    the branch is pushed."""

    project: str
    api_url: str
    push_url: str


@dataclass(frozen=True)
class Overrides:
    """The ``ORCHESTRATOR_*`` variables that name a forge's project, API and push URL."""

    project: str
    api_url: str
    push_url: str


def forge_target(
    environ: Mapping[str, str],
    run: OpenPrRun,
    *,
    forge: str,
    overrides: Overrides,
    parse: Callable[[str], str],
    form: str,
    default_api: str,
    default_push: Callable[[str, str], str],
    resolved_env: str = "",
) -> ForgeTarget:
    """The API: when the orchestrator hands the stage where its forge is (``$<resolved_env>``,
    ``ORCH_GITHUB_API_URL``: what its egress allows, issue 43), the API the ticket's issue
    was read from, else that value. Run by hand without it: each override when set. The project: the one the ticket's repository URL names,
    else (a local path, a mirror) the project of the issue it was taken from (its
    ``[origin]``, on this forge). For a ticket taken from an issue of this forge, the API
    its source read the issue from, and the push goes to the ticket's repository (what
    its source cloned: the source's ``repository``); otherwise the forge's public API and
    ``default_push(api, project)``."""
    origin = run.ticket.fields.origin
    ours = origin if origin is not None and origin.kind == forge else None
    try:
        project = forge_repository(environ, overrides.project, parse, form)
    except StageError:
        if ours is None:
            raise
        project = ours.project
    resolved = environ.get(resolved_env, "") if resolved_env else ""
    if resolved:
        api_url = (ours.api_url if ours else "") or resolved
    else:
        api_url = (
            environ.get(overrides.api_url, "") or (ours.api_url if ours else "") or default_api
        )
    api_url = api_url.rstrip("/")
    push_url = environ.get(overrides.push_url, "") or (
        run.repository if ours else default_push(api_url, project)
    )
    return ForgeTarget(project, api_url, push_url)


# How long one forge request may wait out a rate limit, as the orchestrator hands it
# (``[recovery] forge_max_wait_s``); past it the stage fails ``rate_limited`` and the
# next batch asks again (issue 43).
MAX_WAIT_ENV = "ORCH_FORGE_MAX_WAIT_S"


def max_wait_s(environ: Mapping[str, str]) -> float:
    """``$ORCH_FORGE_MAX_WAIT_S`` when it is a number of seconds from 0 to a day, else the
    forges' own default."""
    try:
        given = float(environ.get(MAX_WAIT_ENV, ""))
    except ValueError:
        return MAX_WAIT_S
    return given if 0.0 <= given <= 86400.0 else MAX_WAIT_S


def require_token(environ: Mapping[str, str], token_env: str, forge: str) -> str:
    token = environ.get(token_env, "")
    if not token:
        raise NotConfigured(
            f"{token_env} is not set: the {forge} forge needs a token that may push and "
            "open pull requests"
        )
    return token


def push_branch(
    environ: Mapping[str, str], work: str, base_ref: str, push_url: str, credentials: Credentials
) -> str:
    """Push ``work`` (its commits over ``base_ref``) to ``push_url``, named by its URL and
    with git hardened, and confirm it is there at our head; return its head sha. A URL
    holding a password is refused: it would be in git's command line (issue 40)."""
    refused = remote_repository_problem(push_url)
    if refused is not None:
        raise StageError(f"cannot push {work}: {refused}")
    token = credentials.token
    with_token = partial(push_environment, credentials)
    try:
        head_sha, commits = push_work(environ, push_url, work, base_ref, with_token)
    except GitError as exc:
        reason = git_reason(exc).replace(token, "***")
        kind = push_failure_kind(reason)
        if kind is not None:
            raise ForgeError(kind, f"cannot push {work}: {reason}") from None
        raise StageError(f"cannot push {work}: {reason}") from None
    print(f"pushed {work} ({head_sha[:7]}, {len(commits)} commit(s))")
    return head_sha


def record(
    pull: PullRequest, *, forge: str, repo: str, head: str, base: str, title: str, sha: str
) -> bytes:
    data: dict[str, Any] = {
        "forge": forge,
        "repository": repo,
        "number": pull.number,
        "url": pull.url,
        "created": pull.created,
        "head": head,
        "base": base,
        "title": title,
        "head_sha": sha,
    }
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def run_open_pr(forge: str, open_request: Callable[[], None]) -> int:
    """Run the stage; expected failures are one line on stderr and an exit code: 0 the
    request is open (created or reused); 1 bad input, or the push failed for a reason that
    is not the forge's; 3 the forge refused (auth, forbidden, not_found, rejected); 4 the
    forge could not be used now (outage, rate_limited)."""
    try:
        open_request()
    except StageError as exc:
        print(f"open-pr: {exc}", file=sys.stderr)
        if isinstance(exc, NotConfigured):
            # The run fails as configured, before any diagnosis is asked or charged.
            print(f"{FAILURE_MARKER}config_error", file=sys.stderr)
        return 1
    except ForgeError as exc:
        print(f"open-pr: {forge} {exc.kind}: {exc}", file=sys.stderr)
        failure_class = FORGE_FAILURE_CLASS.get(exc.kind)
        if failure_class:
            # Tells the orchestrator this is infrastructure: retried after a back-off
            # (outage, rate limit) or handed to a person (credentials), never the model.
            print(f"{FAILURE_MARKER}{failure_class}", file=sys.stderr)
        return EXIT_UNAVAILABLE if exc.kind in _UNAVAILABLE else EXIT_REFUSED
    return 0
