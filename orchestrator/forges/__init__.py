"""Forges: where a finished branch becomes a pull request.

local    stages/open_pr_local.py: push to the ticket's repository, record the PR in a file
github   stages/open_pr_github.py over ``forges.github.GitHubForge`` (REST, idempotent)
"""

from __future__ import annotations

from orchestrator.forges.github import ForgeError, GitHubForge, PullRequest, pr_body, repo_from_url

__all__ = ["ForgeError", "GitHubForge", "PullRequest", "pr_body", "repo_from_url"]
