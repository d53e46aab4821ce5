"""Stage ``open-pr`` for a pipeline fed by more than one forge: opens the pull request
(merge request) on the forge the ticket came from, through ``open_pr_github`` or
``open_pr_gitlab`` — one stage for a config whose ``[[sources]]`` are GitHub and GitLab.

Which forge: the ticket's ``[origin]`` (an issue taken in by a source) when it has one;
else its repository URL when that is on github.com or gitlab.com. Anything else (a
ticket file for a self-managed host, a local path) is refused as a configuration error,
naming the two stages to choose between: guessing a forge would push somewhere nobody
chose.

Runs under the ORCH_* contract with ``GITHUB_TOKEN`` and/or ``GITLAB_TOKEN`` (whichever
the forge needs; ``pass_env`` both). Exit codes, overrides and the token's handling are
the chosen stage's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

from orchestrator.stages import open_pr_github, open_pr_gitlab
from orchestrator.stages._open_pr import NotConfigured, run_open_pr
from orchestrator.stages._stagelib import require_env, stage_ticket

HOSTS = {"github.com": "github", "gitlab.com": "gitlab"}


def forge_of(origin_kind: str | None, repository: str) -> str | None:
    """``github``/``gitlab``: the origin's forge, else the public host the repository URL
    names (https, ssh or ``git@host:path``); None when neither says."""
    if origin_kind is not None:
        return origin_kind
    text = repository.strip()
    if "://" in text:
        host = urlsplit(text).hostname or ""
    else:  # scp-like: [user@]host:path
        head, colon, _ = text.partition(":")
        host = head.rpartition("@")[2] if colon else ""
    return HOSTS.get(host.lower())


def chosen_forge(environ: Mapping[str, str]) -> str:
    ticket = stage_ticket(environ)
    origin = ticket.fields.origin
    forge = forge_of(origin.kind if origin else None, require_env(environ, "ORCH_REPOSITORY"))
    if forge is None:
        raise NotConfigured(
            f"ticket {ticket.id} was not taken from a forge issue and its repository is on "
            "neither github.com nor gitlab.com: run orchestrator.stages.open_pr_github or "
            "orchestrator.stages.open_pr_gitlab for it"
        )
    return forge


def main(environ: Mapping[str, str]) -> int:
    forge = ""

    def choose() -> None:
        nonlocal forge
        forge = chosen_forge(environ)

    refused = run_open_pr("forge", choose)  # a refusal: one line, the config_error marker
    if refused:
        return refused
    return open_pr_github.main(environ) if forge == "github" else open_pr_gitlab.main(environ)


if __name__ == "__main__":
    sys.exit(main(os.environ))
