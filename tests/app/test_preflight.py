"""How the preflight gathers its facts (issue 27): commands expanded as the runner expands
them, programs looked for on the stage's PATH, GitHub asked once with the stage's own
headers, and the config's ``[git]`` author reaching a clone that has none."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import git
import pytest

from orchestrator.app.preflight import (
    ask_github,
    ask_gitlab,
    forge_stages,
    github_stages,
    pass_env,
    programs,
    sandboxed,
)
from orchestrator.cli.console import terminal_services
from orchestrator.domain.config import load_config
from orchestrator.domain.git_identity import AUTHOR_EMAIL_ENV, AUTHOR_NAME_ENV
from orchestrator.domain.preflight import GITLAB
from orchestrator.stages._stagelib import Clone, open_clone
from orchestrator.stages.clone import missing_identity

from conftest import write_config


def stage_toml(name: str, **keys: str) -> str:
    """A ``[[stages]]`` table; ``keys`` are TOML values as written."""
    return f'[[stages]]\nname = "{name}"\n' + "".join(f"{k} = {v}\n" for k, v in keys.items())


def checks_toml(*checks: tuple[str, ...]) -> str:
    """``[[stages.checks]]`` tables: (name, command as TOML, extra lines...)."""
    return "".join(
        f'[[stages.checks]]\nname = "{name}"\ncommand = {command}\n'
        + "".join(f"{x}\n" for x in extra)
        for name, command, *extra in checks
    )


def test_programs_are_expanded_as_the_runner_does_and_looked_for_on_the_stage_path(
    tmp_path: Path,
) -> None:
    tool = tmp_path / "bin" / "my-linter"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    engine = '[engines.agent]\nkind = "command"\ncommand = ["my-agent", "{prompt_file}"]\n'
    config = write_config(
        tmp_path,
        engine
        + stage_toml("a", command='["{python}", "-c", "pass"]')
        + stage_toml("b", engine='"agent"')
        + stage_toml("review")
        + checks_toml(
            ("lint", '["my-linter"]'),
            ("own", '["{root}/bin/my-linter"]'),
            ("wrapper", '["./gradlew", "check"]'),
            ("cloned", '["{clone}/tools/x"]'),
        ),
    )
    # An engine's program is looked for in its sandbox (tests/app/test_engine_probe.py).
    found = programs(load_config(config), {"PATH": str(tool.parent)})
    shown = {f.where: (f.program, f.found, f.later) for f in found}
    assert shown == {
        "stage a": (sys.executable, sys.executable, False),
        "check review:lint": ("my-linter", str(tool), False),
        "check review:own": (str(tool), str(tool), False),
        "check review:wrapper": ("./gradlew", None, True),
        "check review:cloned": ("{clone}/tools/x", None, True),
    }


def test_github_stages_and_what_runs_in_the_sandbox(tmp_path: Path) -> None:
    github = '["{python}", "-P", "-m", "orchestrator.stages.open_pr_github"]'
    config = write_config(
        tmp_path,
        stage_toml("open-pr", command=github, side_effectful="true",
                   pass_env='["GITHUB_TOKEN"]', sandbox='"none"')
        + stage_toml("review")
        + checks_toml(("boxed", '["true"]'), ("open", '["true"]', 'sandbox = "none"')),
        header='[sandbox]\ngit = "none"\n',
    )  # fmt: skip
    loaded = load_config(config)
    [armed] = github_stages(loaded, {})
    assert (armed.stage, armed.passes_token, armed.blocked_by_dry_run) == ("open-pr", True, True)
    assert not github_stages(loaded, {"DRY_RUN": "false"})[0].blocked_by_dry_run
    assert sandboxed(loaded) == ["check review:boxed"]
    assert pass_env(loaded, {}) == []  # its token is the forge-token check's


def test_github_is_asked_once_as_the_stage_asks_it() -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    def send(url: str, headers: Mapping[str, str]) -> int:
        seen.append((url, dict(headers)))
        return 401

    environ = {"GITHUB_TOKEN": "ghp_secret", "ORCHESTRATOR_GITHUB_API_URL": "https://ghe/api/v3/"}
    answer = ask_github(environ, send)
    assert (answer.api_url, answer.status, answer.error) == ("https://ghe/api/v3/", 401, None)
    [(url, headers)] = seen
    assert url == "https://ghe/api/v3/user"
    assert headers == {
        "Authorization": "Bearer ghp_secret",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }


def test_a_network_error_is_named_without_the_token() -> None:
    def refuse(url: str, headers: Mapping[str, str]) -> int:
        raise ConnectionRefusedError(f"refused while sending {headers['Authorization']}")

    answer = ask_github({"GITHUB_TOKEN": "ghp_secret"}, refuse)
    assert answer.api_url == "https://api.github.com" and answer.status is None
    assert answer.error == "ConnectionRefusedError: refused while sending Bearer ***"


def opened(repo: git.Repo) -> Clone:
    """The clone as the clone stage opens it."""
    return open_clone(Path(repo.working_dir), os.environ)


def test_the_configured_author_replaces_the_fallback_never_git_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no global identity
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = git.Repo.init(tmp_path / "clone")
    try:
        assert missing_identity(opened(repo)) == {
            "name": "orchestrator",
            "email": "orchestrator@localhost",
        }
        assert missing_identity(opened(repo), {"name": "Bot"}) == {
            "name": "Bot", "email": "orchestrator@localhost",
        }  # fmt: skip
        with repo.config_writer("repository") as writer:
            writer.set_value("user", "name", "Ada")
        assert missing_identity(opened(repo), {"name": "Bot", "email": "bot@x"}) == {
            "email": "bot@x"
        }
    finally:
        repo.close()


def test_the_git_table_reaches_the_stages_environment(tmp_path: Path) -> None:
    import io

    config = write_config(
        tmp_path,
        '[[stages]]\nname = "a"\ncommand = ["true"]\n',
        header='[git]\nauthor_name = "Release Bot"\nauthor_email = "bot@example.org"\n',
    )
    services = terminal_services(load_config(config), None, io.StringIO(), {"PATH": "/bin"})
    assert services.environ[AUTHOR_NAME_ENV] == "Release Bot"
    assert services.environ[AUTHOR_EMAIL_ENV] == "bot@example.org"


def test_gitlab_stages_are_found_and_gitlab_is_asked_as_its_stage_asks(tmp_path: Path) -> None:
    gitlab = '["{python}", "-P", "-m", "orchestrator.stages.open_pr_gitlab"]'
    config = write_config(
        tmp_path,
        stage_toml("open-mr", command=gitlab, side_effectful="true",
                   pass_env='["GITLAB_TOKEN"]', sandbox='"none"'),
        header='[sandbox]\ngit = "none"\n',
    )  # fmt: skip
    loaded = load_config(config)
    assert github_stages(loaded, {}) == []
    [stage] = forge_stages(loaded, {"DRY_RUN": "false"}, GITLAB)
    assert (stage.stage, stage.passes_token, stage.blocked_by_dry_run) == ("open-mr", True, False)
    assert pass_env(loaded, {}) == []  # its token is the forge-token check's
    seen: list[tuple[str, dict[str, str]]] = []

    def send(url: str, headers: Mapping[str, str]) -> int:
        seen.append((url, dict(headers)))
        raise ConnectionRefusedError(f"refused {headers['PRIVATE-TOKEN']}")

    answer = ask_gitlab({"GITLAB_TOKEN": "glpat-secret", "ORCHESTRATOR_GITLAB_URL": "https://gl/"}, send)  # fmt: skip
    assert seen == [("https://gl/api/v4/user", {"PRIVATE-TOKEN": "glpat-secret", "Accept": "application/json"})]  # fmt: skip
    assert (answer.api_url, answer.error) == ("https://gl/", "ConnectionRefusedError: refused ***")
