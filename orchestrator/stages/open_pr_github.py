"""Stage ``open-pr`` with the GitHub forge: push the branch, then open (or reuse) its pull
request through GitHub's REST API, and record it in ``$ORCH_RUN_DIR/pull-request.json``.

Runs in the clone, under the ORCH_* contract, with ``GITHUB_TOKEN`` in the environment (a
token that may push to the repository and open pull requests on it).

The token is never put where it could leak: git gets it from a credential helper that
reads ``$GITHUB_TOKEN`` from the push's own environment — not from argv (which every user
sees in ``ps``), not from a remote URL or ``.git/config``, and so not from a failed git
call's error, which quotes the command line; the API gets it in a request header only. No
message this script prints contains it.

Handed by the orchestrator (issue 43): ``ORCH_GITHUB_API_URL``, where GitHub is as
``domain/forge_hosts.forge_location`` says (a source's ``api_url``, else
``ORCHESTRATOR_GITHUB_API_URL``, else the public API): the host its egress allows, used
unless the ticket's ``[origin]`` names its source's; ``ORCH_FORGE_MAX_WAIT_S``, how long
one request may wait out a rate limit (``[recovery] forge_max_wait_s``).

Overrides (named ``ORCHESTRATOR_*``: the orchestrator drops inherited ``ORCH_*`` values
before a stage starts):
    ORCHESTRATOR_GITHUB_REPO      ``owner/name`` when the ticket's repository is not a
                                  github.com URL (a mirror, a local path)
    ORCHESTRATOR_GITHUB_API_URL   the API's base URL, read only when the stage is run
                                  without ``ORCH_GITHUB_API_URL`` (by hand)
    ORCHESTRATOR_GITHUB_PUSH_URL  where to push instead of ``https://github.com/<repo>.git``
                                  (a GitHub Enterprise host; in tests, a local bare repository)

Exit codes: 0 the pull request is open (created or reused); 1 bad input, or the push failed
for a reason that is not GitHub's (one line); 3 GitHub refused — the push or the API —
(auth, forbidden, not_found, rejected); 4 GitHub could not be used now (outage,
rate_limited: a limit longer than the wait allowed, said with the time to ask again). Running it again for the same branch reuses the pull request.

When the ticket was taken from a GitHub issue (its ``[origin]``), the pull request is
opened on that issue's repository through the API its source read it from, the branch is
pushed to the ticket's repository (the source's ``repository``: what was cloned), and the
description ends with ``Fixes #N`` so merging closes the issue.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx2

from orchestrator.forges.github import DEFAULT_API_URL, GitHubForge, repo_from_url, web_url
from orchestrator.forges.http import Clock, Sleep
from orchestrator.stages import _open_pr
from orchestrator.stages._open_pr import (
    FORGE_FAILURE_CLASS,
    ClientFactory,
    Credentials,
    NotConfigured,
    OpenPrRun,
    Overrides,
    default_client,
    forge_target,
    push_failure_kind,
    require_token,
    run_open_pr,
    verdict_summaries,
)

__all__ = ["FORGE_FAILURE_CLASS", "NotConfigured", "push_failure_kind", "verdict_summaries"]

TOKEN_ENV = "GITHUB_TOKEN"
RESOLVED_ENV = "ORCH_GITHUB_API_URL"  # where GitHub is, as the orchestrator resolved it
USERNAME = "x-access-token"
CREDENTIAL_HELPER = _open_pr.credential_helper(TOKEN_ENV, USERNAME)
OVERRIDES = Overrides(
    "ORCHESTRATOR_GITHUB_REPO", "ORCHESTRATOR_GITHUB_API_URL", "ORCHESTRATOR_GITHUB_PUSH_URL"
)


def credentials(token: str) -> Credentials:
    return Credentials(token_env=TOKEN_ENV, username=USERNAME, token=token)


def push_environment(token: str, git_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ``git push`` to GitHub (``_open_pr.push_environment``)."""
    return _open_pr.push_environment(credentials(token), git_env)


def _repo(url: str, host: str) -> str:
    """``owner/name`` of a repository URL on ``host`` (the GitHub named), else github.com."""
    try:
        return repo_from_url(url, host)
    except ValueError:
        return repo_from_url(url)


def open_pull_request(
    environ: Mapping[str, str],
    client_factory: ClientFactory,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
) -> None:
    token = require_token(environ, TOKEN_ENV, "github")
    run = OpenPrRun.from_environ(environ)
    # The GitHub the orchestrator named (a GitHub Enterprise host, say): its repository
    # URLs name the project, and a branch is pushed there (issue 43).
    named = environ.get(RESOLVED_ENV) or environ.get(OVERRIDES.api_url) or DEFAULT_API_URL
    web = web_url(named)
    target = forge_target(
        environ, run, forge="github", overrides=OVERRIDES, form="owner/name",
        parse=lambda url: _repo(url, urlsplit(web).netloc),
        default_api=DEFAULT_API_URL,
        default_push=lambda _api, repo: f"{web}/{repo}.git",
        resolved_env=RESOLVED_ENV,
    )  # fmt: skip
    repo, push_url, api_url = target.project, target.push_url, target.api_url

    head_sha = _open_pr.push_branch(environ, run.work, run.base_ref, push_url, credentials(token))
    with client_factory(api_url) as client:
        forge = GitHubForge(
            client, repo, token, network_errors=(httpx2.TransportError,), sleep=sleep,
            clock=clock, max_wait_s=_open_pr.max_wait_s(environ),
        )  # fmt: skip
        run.open_on(forge, name="github", project=repo, sha=head_sha, shown="pull request #")


def main(
    environ: Mapping[str, str],
    client_factory: ClientFactory = default_client,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
) -> int:
    """Run the stage; expected failures are one line on stderr and an exit code."""
    return run_open_pr("github", lambda: open_pull_request(environ, client_factory, sleep, clock))


if __name__ == "__main__":
    sys.exit(main(os.environ))
