"""Stage ``open-pr`` with the GitLab forge: push the branch, then open (or reuse) its merge
request through GitLab's REST API (gitlab.com or a self-managed host), and record it in
``$ORCH_RUN_DIR/pull-request.json``.

Runs in the clone, under the ORCH_* contract, with ``GITLAB_TOKEN`` in the environment (a
token with the ``api`` scope and at least Developer access to the project). git gets the
token from a credential helper (user ``oauth2``), the API in a ``PRIVATE-TOKEN`` header
(``_open_pr``): never argv, a URL or a file. No message this script prints contains it.

When the ticket was taken from a GitLab issue (its ``[origin]``), the merge request is
opened on that issue's project on the host its source read it from, the branch is pushed
to the ticket's repository (the source's ``repository``: what was cloned), and the
description ends with ``Closes #N`` so merging closes the issue.

Handed by the orchestrator (issue 43): ``ORCH_GITLAB_URL``, where GitLab is as
``domain/forge_hosts.forge_location`` says (a source's ``base_url``, else
``ORCHESTRATOR_GITLAB_URL``, else https://gitlab.com): the host its egress allows, used
unless the ticket's ``[origin]`` names its source's; ``ORCH_FORGE_MAX_WAIT_S``, how long
one request may wait out a rate limit.

Overrides (named ``ORCHESTRATOR_*``: the orchestrator drops inherited ``ORCH_*`` values
before a stage starts):
    ORCHESTRATOR_GITLAB_URL       the GitLab host's base URL, read only when the stage is
                                  run without ``ORCH_GITLAB_URL`` (by hand)
    ORCHESTRATOR_GITLAB_PROJECT   ``group/sub/name`` when the ticket's repository is not a
                                  GitLab URL (a mirror, a local path)
    ORCHESTRATOR_GITLAB_PUSH_URL  where to push instead of ``<url>/<project>.git`` (in
                                  tests, a local bare repository)

Exit codes as ``_open_pr.run_open_pr``: 0 open (created or reused), 1 bad input or a push
that failed for a reason not GitLab's, 3 GitLab refused, 4 GitLab unavailable now.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

import httpx2

from orchestrator.forges.gitlab import DEFAULT_URL, GitLabForge, project_from_url
from orchestrator.forges.http import Sleep
from orchestrator.stages import _open_pr
from orchestrator.stages._open_pr import (
    ClientFactory,
    Credentials,
    OpenPrRun,
    Overrides,
    default_client,
    forge_target,
    push_branch,
    require_token,
    run_open_pr,
)

TOKEN_ENV = "GITLAB_TOKEN"
USERNAME = "oauth2"  # what GitLab expects beside a token over https
OVERRIDES = Overrides(
    "ORCHESTRATOR_GITLAB_PROJECT", "ORCHESTRATOR_GITLAB_URL", "ORCHESTRATOR_GITLAB_PUSH_URL"
)


def open_merge_request(
    environ: Mapping[str, str], client_factory: ClientFactory, sleep: Sleep = time.sleep
) -> None:
    token = require_token(environ, TOKEN_ENV, "gitlab")
    run = OpenPrRun.from_environ(environ)
    target = forge_target(
        environ, run, forge="gitlab", overrides=OVERRIDES, parse=project_from_url,
        form="group/name", default_api=DEFAULT_URL,
        default_push=lambda base_url, project: f"{base_url}/{project}.git",
        resolved_env="ORCH_GITLAB_URL",
    )  # fmt: skip
    project, base_url, push_url = target.project, target.api_url, target.push_url

    credentials = Credentials(token_env=TOKEN_ENV, username=USERNAME, token=token)
    head_sha = push_branch(environ, run.work, run.base_ref, push_url, credentials)
    with client_factory(base_url) as client:
        forge = GitLabForge(
            client, base_url, project, token, network_errors=(httpx2.TransportError,), sleep=sleep,
            max_wait_s=_open_pr.max_wait_s(environ),
        )  # fmt: skip
        run.open_on(forge, name="gitlab", project=project, sha=head_sha, shown="merge request !")


def main(
    environ: Mapping[str, str],
    client_factory: ClientFactory = default_client,
    sleep: Sleep = time.sleep,
) -> int:
    """Run the stage; expected failures are one line on stderr and an exit code."""
    return run_open_pr("gitlab", lambda: open_merge_request(environ, client_factory, sleep))


if __name__ == "__main__":
    sys.exit(main(os.environ))
