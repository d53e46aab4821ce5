"""Issue 43: one answer to "where is this forge", from the config and the environment
(``forge_hosts.forge_location``): a source's URL (config), else the orchestrator's
override, else the public host; and the value a forge stage is handed is the host its
egress allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import Config, parse_config
from orchestrator.domain.egress import host_of_url
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.forge_hosts import forge_location, source_location
from orchestrator.domain.stage_hosts import egress_hosts, forge_urls
from orchestrator.forges.github import repo_from_url, web_url

GHE = "https://ghe.example.com/api/v3"
GITLAB = "https://gitlab.example.org"


def config(sources: str, module: str = "open_pr", side_effectful: bool = True) -> Config:
    return parse_config(
        sources + '[[stages]]\nname = "open-pr"\n'
        f'command = ["{{python}}", "-P", "-m", "orchestrator.stages.{module}"]\n'
        f"network = true\nside_effectful = {str(side_effectful).lower()}\n",
        Path("c.toml"),
    )


def github_source(api_url: str | None) -> str:
    url = f'api_url = "{api_url}"\n' if api_url else ""
    return f'[[sources]]\nkind = "github"\nrepo = "o/r"\nlabel = "x"\n{url}\n'


def gitlab_source(base_url: str) -> str:
    return (
        f'[[sources]]\nkind = "gitlab"\nproject = "g/p"\nlabel = "x"\nbase_url = "{base_url}"\n\n'
    )


def test_config_then_override_then_the_public_host_each_said() -> None:
    override = {"ORCHESTRATOR_GITHUB_API_URL": "https://other.example/api/v3/"}
    named = config(github_source(GHE + "/"))
    found = forge_location("github", named.sources, override)
    assert (found.url, found.named, found.named_by) == (
        GHE, "config", "source gh-o-r's api_url",
    )  # fmt: skip
    bare = config("")
    found = forge_location("github", bare.sources, override)
    assert (found.url, found.named, found.named_by) == (
        "https://other.example/api/v3", "override", "$ORCHESTRATOR_GITHUB_API_URL",
    )  # fmt: skip
    found = forge_location("gitlab", bare.sources, {})
    assert (found.url, found.named, found.named_by) == (
        "https://gitlab.com", "default", "the public host",
    )  # fmt: skip
    # A source that names no URL reads the public host, and says that no key named it.
    [plain] = config(github_source(None)).sources
    assert source_location(plain).named == "default"  # type: ignore[arg-type]
    assert forge_location("github", (plain,), override).url == "https://api.github.com"


def test_the_stage_is_handed_the_url_its_egress_allows() -> None:
    both = config(github_source(GHE) + gitlab_source(GITLAB))
    [stage] = both.stages
    handed = forge_urls(stage, both, "/srv/widgets.git", {})
    assert handed == {
        "ORCH_GITHUB_API_URL": GHE,
        "ORCH_GITLAB_URL": GITLAB,
        "ORCH_FORGE_MAX_WAIT_S": "60",
    }
    allowed = egress_hosts(stage, both, "", "/srv/widgets.git", {})
    for url in (GHE, GITLAB):
        assert host_of_url(url) in allowed
    # The override reaches the forge's own stage as a value, without pass_env, and is
    # the host its egress allows; the orchestrator's env is read once, for both.
    own = config("", module="open_pr_gitlab")
    [stage] = own.stages
    env = {"ORCHESTRATOR_GITLAB_URL": "http://127.0.0.1:8929"}
    assert forge_urls(stage, own, "/srv/p.git", env)["ORCH_GITLAB_URL"] == "http://127.0.0.1:8929"
    assert "127.0.0.1:8929" in egress_hosts(stage, own, "", "/srv/p.git", env)
    # A stage that acts on no forge is handed nothing.
    quiet = config("", module="open_pr_gitlab", side_effectful=False)
    assert forge_urls(quiet.stages[0], quiet, "/srv/p.git", env) == {}


def test_the_open_pr_stage_may_name_its_forge_and_only_a_forge_stage_may() -> None:
    own = parse_config(
        '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr_github"]\n'
        f'side_effectful = true\nforge_url = "{GHE}/"\n',
        Path("c.toml"),
    )
    env = {"ORCHESTRATOR_GITHUB_API_URL": "https://other.example/api/v3"}
    found = forge_location("github", own.sources, env, own.stages)
    assert (found.url, found.named, found.named_by) == (
        GHE, "config", "stage open-pr's forge_url",
    )  # fmt: skip
    assert forge_location("gitlab", own.sources, {}, own.stages).named == "default"
    [stage] = own.stages
    assert forge_urls(stage, own, "/srv/w.git", env)["ORCH_GITHUB_API_URL"] == GHE
    assert "ghe.example.com:443" in egress_hosts(stage, own, "", "/srv/w.git", env)
    with pytest.raises(ConfigError, match="'forge_url' is only meaningful for a stage that runs"):
        parse_config(
            '[[stages]]\nname = "x"\ncommand = ["true"]\nforge_url = "https://ghe.example.com"\n',
            Path("c.toml"),
        )


def test_a_github_enterprise_repository_url_names_its_project_on_that_host_only() -> None:
    assert web_url("https://api.github.com") == "https://github.com"
    assert web_url(GHE) == "https://ghe.example.com"
    host = "ghe.example.com"
    assert repo_from_url("https://ghe.example.com/octo/widgets.git", host) == "octo/widgets"
    assert repo_from_url("git@ghe.example.com:octo/widgets.git", host) == "octo/widgets"
    for elsewhere in ("https://evil.example/octo/widgets.git", "https://ghe.example.com.evil/o/w"):
        with pytest.raises(ValueError, match="not a GitHub repository URL"):
            repo_from_url(elsewhere, host)
