"""Which hosts a stage's attempt, or a check, may reach (issue 40, item 4). Pure.

An engine: its kind's provider (``egress.ENGINE_HOSTS``) or its ``base_url``'s host,
and its own ``egress``. A command stage: the ticket's repository when it is an http(s)
URL and, when side-effectful, the forges' APIs where ``forge_hosts`` says a forge is and
the push URL overrides; ``forge_urls`` hands it the same URLs as values. A ticket's
``[origin]`` never adds a host.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.domain.config import Config, StageConfig
from orchestrator.domain.egress import ENGINE_HOSTS, NetworkAccess, host_of_url, network_access
from orchestrator.domain.forge_hosts import ForgeKind, forge_location, source_api
from orchestrator.domain.sandbox import SandboxOptions
from orchestrator.domain.sources import GitHubSource, GitLabSource

# Where the forge stages push instead of the ticket's repository, when set (the API is
# ``forge_hosts.forge_api``'s: the one rule for where a forge is).
PUSH_URL_VARIABLES = ("ORCHESTRATOR_GITHUB_PUSH_URL", "ORCHESTRATOR_GITLAB_PUSH_URL")
_FORGE_MODULES: dict[str, tuple[ForgeKind, ...]] = {
    "orchestrator.stages.open_pr_github": ("github",),
    "orchestrator.stages.open_pr_gitlab": ("gitlab",),
}
# The open-pr that picks its forge by the repository's host (stages/open_pr.py).
_BY_HOST: dict[str, ForgeKind] = {"github.com": "github", "gitlab.com": "gitlab"}
# The values a forge stage is handed: where each forge is, as ``forge_location`` says.
FORGE_MAX_WAIT = "ORCH_FORGE_MAX_WAIT_S"
FORGE_URL_VARIABLES: dict[ForgeKind, str] = {
    "github": "ORCH_GITHUB_API_URL",
    "gitlab": "ORCH_GITLAB_URL",
}


def egress_hosts(
    stage: StageConfig,
    config: Config,
    engine: str,
    repository: str,
    environ: Mapping[str, str],
) -> tuple[str, ...]:
    """The hosts ``stage`` is given besides its own ``egress`` (see the module's doc)."""
    if stage.engine is not None:
        chosen = config.engines.get(engine)
        if chosen is None:
            return ()
        base_url = chosen.settings.get("base_url")
        moved = host_of_url(base_url) if isinstance(base_url, str) else None
        provider = (moved,) if moved else ENGINE_HOSTS.get(chosen.kind, ())
        return (*provider, *chosen.egress)
    hosts = [host_of_url(repository)]
    if stage.side_effectful:
        hosts += [host_of_url(environ.get(name, "")) for name in PUSH_URL_VARIABLES]
        hosts += [
            host_of_url(source_api(source))
            for source in config.sources
            if isinstance(source, GitHubSource | GitLabSource)
        ]
        hosts += [
            host_of_url(forge_location(kind, config.sources, environ, config.stages).url)
            for kind in _stage_kinds(stage, repository)
        ]
    return tuple(dict.fromkeys(host for host in hosts if host is not None))


def stage_network(stage: StageConfig, hosts: tuple[str, ...]) -> NetworkAccess | None:
    """What ``stage``'s attempt reaches (``hosts``: ``egress_hosts``), for its record and
    its start's warning; None for a check stage (each check has its own) or one outside
    the sandbox."""
    if stage.is_check_stage or stage.sandbox == "none":
        return None
    engine = stage.engine is not None
    return network_access(stage.network, engine=engine, declared=stage.egress, implied=hosts)


def check_network(options: SandboxOptions) -> NetworkAccess | None:
    """What a check (its own settings over its stage's) reaches; None outside the
    sandbox."""
    if options.sandbox == "none":
        return None
    return network_access(options.network, engine=False, declared=options.egress)


def _stage_kinds(stage: StageConfig, repository: str) -> list[ForgeKind]:
    """The forges a stage's command opens requests on without an issue's [origin]."""
    words = stage.command or ()
    kinds = [kind for module, named in _FORGE_MODULES.items() if module in words for kind in named]
    repo_host = (host_of_url(repository) or "").rsplit(":", 1)[0]
    if "orchestrator.stages.open_pr" in words and repo_host in _BY_HOST:
        kinds.append(_BY_HOST[repo_host])
    return kinds


def forge_urls(
    stage: StageConfig, config: Config, repository: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """``ORCH_GITHUB_API_URL`` / ``ORCH_GITLAB_URL`` for a side-effectful stage that opens
    requests on that forge (its module's, or for ``open_pr`` each forge it may choose):
    the URL ``egress_hosts`` allowed, so the stage never needs an ``ORCHESTRATOR_*``
    variable in its ``pass_env`` to find a self-hosted forge; and
    ``ORCH_FORGE_MAX_WAIT_S``, ``[recovery] forge_max_wait_s``."""
    if stage.command is None or not stage.side_effectful:
        return {}
    kinds = _stage_kinds(stage, repository)
    if "orchestrator.stages.open_pr" in stage.command:
        kinds += [s.kind for s in config.sources if isinstance(s, GitHubSource | GitLabSource)]
    urls = {
        FORGE_URL_VARIABLES[kind]: forge_location(kind, config.sources, environ, config.stages).url
        for kind in dict.fromkeys(kinds)
    }
    # And how long one of its requests may wait out a rate limit.
    return {**urls, FORGE_MAX_WAIT: f"{config.recovery.forge_max_wait_s:g}"} if urls else {}
