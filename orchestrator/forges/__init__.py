"""Forges: where a finished branch becomes a pull request, behind one protocol
(``base.Forge``).

local    ``local.LocalForge``: the branch pushed to the ticket's repository, the pull
         request a record in the run directory (stage ``orchestrator.stages.open_pr_local``)
github   ``github.GitHubForge``: REST, idempotent (stage ``orchestrator.stages.open_pr_github``)
gitlab   ``gitlab.GitLabForge``: REST v4, gitlab.com or self-managed; merge requests, issues,
         notes, access levels (stage ``orchestrator.stages.open_pr_gitlab``)

Imported from their own modules: the package loads none, so the local forge's stage
program does not load the REST clients (http.client, email) of the other two.
"""
