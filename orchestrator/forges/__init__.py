"""Forges: where a finished branch becomes a pull request, behind one protocol
(``base.Forge``).

local    ``local.LocalForge``: the branch pushed to the ticket's repository, the pull
         request a record in the run directory (stage ``orchestrator.stages.open_pr_local``)
github   ``github.GitHubForge``: REST, idempotent (stage ``orchestrator.stages.open_pr_github``)
gitlab   ``gitlab.GitLabForge``: REST v4, gitlab.com or self-managed; merge requests, issues,
         notes, access levels (stage ``orchestrator.stages.open_pr_gitlab``)
"""

from __future__ import annotations

from orchestrator.forges.base import Forge, ForgeError, PullRequest
from orchestrator.forges.github import GitHubForge, pr_body, repo_from_url
from orchestrator.forges.gitlab import GitLabForge, project_from_url
from orchestrator.forges.local import LocalForge

__all__ = [
    "Forge",
    "ForgeError",
    "GitHubForge",
    "GitLabForge",
    "LocalForge",
    "PullRequest",
    "pr_body",
    "project_from_url",
    "repo_from_url",
]
