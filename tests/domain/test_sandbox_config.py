"""The sandbox keys of config.toml: what they accept, what they refuse (naming the key),
and the executor a stage or check gets from them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orchestrator.domain.config import Config, LoadedConfig, parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.execution.attempts import Services, sandboxed
from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.sandbox import SandboxedExecutor
from orchestrator.reports.display import PlainReporter
from orchestrator.storage.runs import RunStore

BASE = """
[engines.coder]
command = ["bash", "-c", "true"]

[[stages]]
name = "implement"
engine = "coder"
{engine_extra}

[[stages]]
name = "build"
command = ["make"]
{build_extra}

[[stages]]
name = "review"

[[stages.checks]]
name = "tests"
command = ["pytest"]
{check_extra}
"""


def parse(recovery: str = "", engine_extra: str = "", build_extra: str = "",
          check_extra: str = "") -> Config:  # fmt: skip
    text = recovery + BASE.format(
        engine_extra=engine_extra, build_extra=build_extra, check_extra=check_extra
    )
    return parse_config(text, Path("/p/config.toml"))


def test_recipes_are_sandboxed_by_default_and_none_is_an_explicit_opt_out() -> None:
    assert parse().recovery.recipe_sandbox == "bwrap"
    assert parse('[recovery]\nrecipe_sandbox = "none"\n').recovery.recipe_sandbox == "none"
    with pytest.raises(ConfigError, match=r"recovery\.recipe_sandbox"):
        parse('[recovery]\nrecipe_sandbox = "docker"\n')


def test_network_and_writable_need_sandbox_true() -> None:
    with pytest.raises(ConfigError, match="'network' and 'writable' are only meaningful"):
        parse(check_extra="network = true")
    with pytest.raises(ConfigError, match="'network' and 'writable' are only meaningful"):
        parse(build_extra='writable = ["out"]')
    with pytest.raises(ConfigError, match=r"stages\[2\]\.checks\[0\]\.sandbox"):
        parse(check_extra='sandbox = "yes"')


def services(config: Config) -> Services:
    return Services(
        loaded=LoadedConfig(config=config, path=Path("/p/config.toml"), root=Path("/p"), sha256=""),
        store=RunStore(Path("/p/state")),
        reporter=PlainReporter(io.StringIO()),
        executor=LocalExecutor(),
    )


def test_a_stage_gets_the_sandbox_its_config_asks_for() -> None:
    config = parse(
        engine_extra="sandbox = true",
        build_extra='sandbox = true\nwritable = ["../cache", "/srv/out"]',
        check_extra="sandbox = true\nnetwork = true",
    )
    svc = services(config)
    clone = Path("/runs/r1/clone")
    build = sandboxed(svc, config.stage("build"), cwd=clone)
    assert isinstance(build, SandboxedExecutor) and build.inner is svc.executor
    assert build.spec.writable == (clone, Path("/runs/r1/cache"), Path("/srv/out"))
    assert build.spec.network is False  # a command's default
    assert build.spec.readable == (Path("/p"),)  # the config's root, for {root} scripts
    assert build.spec.environment({"HOME": "/home/me", "X": "1"}) == {"HOME": "/home/me", "X": "1"}
    # An engine calls its model: it keeps the network unless its config says otherwise.
    engine = sandboxed(svc, config.stage("implement"), cwd=clone, network_default=True)
    assert isinstance(engine, SandboxedExecutor) and engine.spec.network is True
    check = sandboxed(svc, config.stage("review").checks[0], cwd=clone)
    assert isinstance(check, SandboxedExecutor) and check.spec.network is True
    # Not asked for: the plain executor, untouched.
    assert sandboxed(svc, parse().stage("build"), cwd=clone) is svc.executor


def test_the_shipped_config_documents_the_sandbox_keys_and_parses() -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "config.toml").read_text()
    assert 'recipe_sandbox = "bwrap"' in text and "# sandbox = true" in text
    assert parse_config(text, root / "config.toml").recovery.recipe_sandbox == "bwrap"
