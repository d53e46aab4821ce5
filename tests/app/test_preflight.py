"""How the preflight gathers its facts (issue 27): commands expanded as the runner expands
them, programs looked for on the stage's PATH, GitHub asked once with the stage's own
headers, and the config's ``[git]`` author reaching a clone that has none."""

from __future__ import annotations

import sys
from pathlib import Path

import git
import httpx2
import pytest

from orchestrator.app.preflight import ask_github, github_stages, pass_env, programs, sandboxed
from orchestrator.app.services import build_services
from orchestrator.domain.config import load_config
from orchestrator.domain.git_identity import AUTHOR_EMAIL_ENV, AUTHOR_NAME_ENV
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
    found = programs(load_config(config), {"PATH": str(tool.parent)})
    shown = {f.where: (f.program, f.found, f.later) for f in found}
    assert shown == {
        "stage a": (sys.executable, sys.executable, False),
        "engine agent (stage b)": ("my-agent", None, False),
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


def client_answering(status: int, seen: list[httpx2.Request]) -> object:
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(status, json={"login": "octocat"})

    return lambda api_url: httpx2.Client(base_url=api_url, transport=httpx2.MockTransport(handler))


def test_github_is_asked_once_as_the_stage_asks_it() -> None:
    seen: list[httpx2.Request] = []
    environ = {"GITHUB_TOKEN": "ghp_secret", "ORCHESTRATOR_GITHUB_API_URL": "https://ghe/api/v3"}
    answer = ask_github(environ, client_answering(401, seen))  # type: ignore[arg-type]
    assert (answer.api_url, answer.status, answer.error) == ("https://ghe/api/v3", 401, None)
    [request] = seen
    assert (request.method, str(request.url)) == ("GET", "https://ghe/api/v3/user")
    assert request.headers["Authorization"] == "Bearer ghp_secret"
    assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"


def test_a_network_error_is_named_without_the_token() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError(f"refused while sending {request.headers['Authorization']}")

    answer = ask_github(
        {"GITHUB_TOKEN": "ghp_secret"},
        lambda url: httpx2.Client(base_url=url, transport=httpx2.MockTransport(refuse)),
    )
    assert (
        answer.status is None and answer.error == "ConnectError: refused while sending Bearer ***"
    )


def test_the_configured_author_replaces_the_fallback_never_git_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no global identity
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = git.Repo.init(tmp_path / "clone")
    try:
        assert missing_identity(repo) == {"name": "orchestrator", "email": "orchestrator@localhost"}
        assert missing_identity(repo, {"name": "Bot"}) == {
            "name": "Bot", "email": "orchestrator@localhost",
        }  # fmt: skip
        with repo.config_writer("repository") as writer:
            writer.set_value("user", "name", "Ada")
        assert missing_identity(repo, {"name": "Bot", "email": "bot@x"}) == {"email": "bot@x"}
    finally:
        repo.close()


def test_the_git_table_reaches_the_stages_environment(tmp_path: Path) -> None:
    import io

    config = write_config(
        tmp_path,
        '[[stages]]\nname = "a"\ncommand = ["true"]\n',
        header='[git]\nauthor_name = "Release Bot"\nauthor_email = "bot@example.org"\n',
    )
    services = build_services(load_config(config), None, io.StringIO(), {"PATH": "/bin"})
    assert services.environ[AUTHOR_NAME_ENV] == "Release Bot"
    assert services.environ[AUTHOR_EMAIL_ENV] == "bot@example.org"
