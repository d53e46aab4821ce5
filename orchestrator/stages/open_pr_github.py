"""Stage ``open-pr`` with the GitHub forge: push the branch, then open (or reuse) its pull
request through GitHub's REST API, and record it in ``$ORCH_RUN_DIR/pull-request.json``.

Runs in the clone, under the ORCH_* contract, with ``GITHUB_TOKEN`` in the environment (a
token that may push to the repository and open pull requests on it).

The token is never put where it could leak: git gets it from a credential helper that
reads ``$GITHUB_TOKEN`` from the push's own environment — not from argv (which every user
sees in ``ps``), not from a remote URL or ``.git/config``, and so not from GitPython's
error text, which quotes the command line; the API gets it in a request header only. No
message this script prints contains it.

Overrides (named ``ORCHESTRATOR_*``: the orchestrator drops inherited ``ORCH_*`` values
before a stage starts):
    ORCHESTRATOR_GITHUB_REPO      ``owner/name`` when the ticket's repository is not a
                                  github.com URL (a mirror, a local path)
    ORCHESTRATOR_GITHUB_API_URL   the API's base URL (GitHub Enterprise:
                                  ``https://HOST/api/v3``); default https://api.github.com
    ORCHESTRATOR_GITHUB_PUSH_URL  where to push instead of ``https://github.com/<repo>.git``
                                  (a GitHub Enterprise host; in tests, a local bare repository)

Exit codes: 0 the pull request is open (created or reused); 1 bad input, or the push failed
for a reason that is not GitHub's (one line); 3 GitHub refused — the push or the API —
(auth, forbidden, not_found, rejected); 4 GitHub could not be used now (outage,
rate_limited). Running it again for the same branch reuses the pull request.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import git
import httpx2

from orchestrator.execution.git import overriding
from orchestrator.forges.base import Forge, ForgeError, PullRequest
from orchestrator.forges.github import DEFAULT_API_URL, GitHubForge, pr_body, repo_from_url
from orchestrator.reading.signs import FAILURE_MARKER
from orchestrator.stages._stagelib import (
    StageError,
    confirm_pushed,
    git_reason,
    open_clone,
    require_env,
    stage_ticket,
    transport_env,
)
from orchestrator.storage import StateLayout, atomic_write, verdict_files

RECORD_NAME = "pull-request.json"
EXIT_REFUSED = 3
EXIT_UNAVAILABLE = 4
_UNAVAILABLE = frozenset({"outage", "rate_limited"})
HTTP_TIMEOUT_S = 30.0

# git runs this with the action as $1; only "get" is answered, so nothing is stored.
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || return 0; echo username=x-access-token; '
    'echo "password=$GITHUB_TOKEN"; }; f'
)

# Any helper configured before is dropped (the empty value), then ours answers.
CREDENTIAL_SETTINGS = (("credential.helper", ""), ("credential.helper", CREDENTIAL_HELPER))

ClientFactory = Callable[[str], httpx2.Client]


def default_client(api_url: str) -> httpx2.Client:
    return httpx2.Client(base_url=api_url, timeout=HTTP_TIMEOUT_S)


def push_environment(token: str, git_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ``git push``: ``git_env`` (the clone's hardened one, its push
    transport allowed) with our helper after every setting in it, replacing any configured
    one (a user's credential store must neither answer nor keep this token), and git may
    not stop to ask a terminal for a password."""
    base = {**(git_env or {}), "GITHUB_TOKEN": token, "GIT_TERMINAL_PROMPT": "0"}
    return overriding(base, CREDENTIAL_SETTINGS)


# What git says when GitHub refuses the push or cannot be reached (git's own wording; the
# URL in it carries no credentials: we never put them there).
_PUSH_FAILURES = (
    ("auth", re.compile(r"authentication failed|could not read (?:username|password)|"
                        r"invalid username or (?:password|token)", re.IGNORECASE)),
    ("forbidden", re.compile(r"returned error: 403|permission to \S+ denied|"
                             r"write access to repository not granted", re.IGNORECASE)),
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


def github_repo(environ: Mapping[str, str], repository: str) -> str:
    override = environ.get("ORCHESTRATOR_GITHUB_REPO", "")
    if override:
        return override
    try:
        return repo_from_url(repository)
    except ValueError as exc:
        raise StageError(f"{exc}; set ORCHESTRATOR_GITHUB_REPO=owner/name") from None


def push_branch(
    environ: Mapping[str, str], work: str, base_ref: str, push_url: str, token: str
) -> str:
    """Push ``work`` (its commits over ``base_ref``) to ``push_url``, named by its URL and
    with git hardened, and confirm it is there at our head; return its head sha."""
    with open_clone(Path.cwd(), environ) as repo:
        if work not in repo.heads:
            raise StageError(f"branch {work} does not exist in {repo.working_dir}")
        head_sha = repo.heads[work].commit.hexsha
        commits = list(repo.iter_commits(f"{base_ref}..{work}"))
        if not commits:
            raise StageError(f"{work} has no commits on top of {base_ref}: nothing to propose")
        env = push_environment(token, transport_env(repo, push_url))
        try:
            # '+': the branch is the orchestrator's own, so a retry that rebuilt it from the
            # base replaces what an earlier attempt pushed.
            repo.git.push(push_url, f"+refs/heads/{work}:refs/heads/{work}", env=env)
            confirm_pushed(repo, push_url, work, head_sha, env, push_url)
        except git.GitCommandError as exc:
            reason = git_reason(exc).replace(token, "***")
            kind = push_failure_kind(reason)
            if kind is not None:
                raise ForgeError(kind, f"cannot push {work}: {reason}") from None
            raise StageError(f"cannot push {work}: {reason}") from None
        print(f"pushed {work} ({head_sha[:7]}, {len(commits)} commit(s))")
        return head_sha


def record(pull: PullRequest, *, repo: str, head: str, base: str, title: str, sha: str) -> bytes:
    data: dict[str, Any] = {
        "forge": "github",
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


class NotConfigured(StageError):
    """What the machine lacks, not the change (a missing token): no model can fix it, and
    retrying cannot either; a person sets it and resumes."""


def open_pull_request(environ: Mapping[str, str], client_factory: ClientFactory) -> None:
    token = environ.get("GITHUB_TOKEN", "")
    if not token:
        raise NotConfigured(
            "GITHUB_TOKEN is not set: the github forge needs a token that may push and "
            "open pull requests"
        )
    ticket = stage_ticket(environ)
    repository = require_env(environ, "ORCH_REPOSITORY")
    base = require_env(environ, "ORCH_BASE_BRANCH")
    base_ref = require_env(environ, "ORCH_BASE_REF")
    work = require_env(environ, "ORCH_WORK_BRANCH")
    run_id = require_env(environ, "ORCH_RUN_ID")
    run_dir = Path(require_env(environ, "ORCH_RUN_DIR"))
    state_dir = Path(require_env(environ, "ORCH_STATE_DIR"))
    repo = github_repo(environ, repository)
    push_url = environ.get("ORCHESTRATOR_GITHUB_PUSH_URL", "") or f"https://github.com/{repo}.git"
    api_url = environ.get("ORCHESTRATOR_GITHUB_API_URL", "") or DEFAULT_API_URL

    head_sha = push_branch(environ, work, base_ref, push_url, token)
    body = pr_body(ticket.body, verdict_summaries(state_dir, run_id), run_id)
    with client_factory(api_url) as client:
        forge: Forge = GitHubForge(client, repo, token, network_errors=(httpx2.TransportError,))
        pull = forge.open_pull_request(head=work, base=base, title=ticket.fields.title, body=body)
    title = ticket.fields.title
    atomic_write(
        run_dir / RECORD_NAME,
        record(pull, repo=repo, head=work, base=base, title=title, sha=head_sha),
    )
    verb = "opened" if pull.created else "reused the open"
    print(f"{verb} pull request #{pull.number}: {pull.url}")


# GitHub's answers that are about access or availability, not about the change: a 404
# (wrong repository) or a 422 (GitHub refused this pull request) go to recovery as usual.
FORGE_FAILURE_CLASS = {
    "auth": "auth_error",
    "forbidden": "auth_error",
    "rate_limited": "rate_limited",
    "outage": "outage",
}


def main(environ: Mapping[str, str], client_factory: ClientFactory = default_client) -> int:
    """Run the stage; expected failures are one line on stderr and an exit code."""
    try:
        open_pull_request(environ, client_factory)
    except StageError as exc:
        print(f"open-pr: {exc}", file=sys.stderr)
        if isinstance(exc, NotConfigured):
            # The run fails as configured, before any diagnosis is asked or charged.
            print(f"{FAILURE_MARKER}config_error", file=sys.stderr)
        return 1
    except ForgeError as exc:
        print(f"open-pr: github {exc.kind}: {exc}", file=sys.stderr)
        failure_class = FORGE_FAILURE_CLASS.get(exc.kind)
        if failure_class:
            # Tells the orchestrator this is infrastructure: retried after a back-off
            # (outage, rate limit) or handed to a person (credentials), never the model.
            print(f"{FAILURE_MARKER}{failure_class}", file=sys.stderr)
        return EXIT_UNAVAILABLE if exc.kind in _UNAVAILABLE else EXIT_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
