"""Where the registry cannot be reached the contract tests skip, saying why; under
``CI=true`` they fail instead. (The install itself is proven by every contract test.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import agents

pytestmark = pytest.mark.slow


@pytest.fixture
def unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache and an npm registry on a loopback port nothing listens on."""
    monkeypatch.setenv("ORCHESTRATOR_AGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    return tmp_path / "cache"


def test_an_unreachable_registry_skips_with_the_reason_printed(
    unreachable: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the npm registry cannot be reached"):
        agents.npm_prefix()
    printed = capsys.readouterr().out
    assert printed.startswith("contract tests skipped: the npm registry cannot be reached: ")
    assert "ECONNREFUSED" in printed
    assert not (unreachable / "npm" / agents.MARKER).exists()


def test_under_ci_an_unreachable_registry_fails(
    unreachable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the contract tests"):
        agents.npm_prefix()


def test_the_cache_is_named_by_the_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORCHESTRATOR_AGENT_CACHE", raising=False)
    default = agents.cache_dir()
    assert default.parent == Path.home() / ".cache" / "orchestrator-contract"
    monkeypatch.setattr(agents, "NPM_PACKAGES", {**agents.NPM_PACKAGES, "@openai/codex": "9"})
    assert agents.cache_dir() != default  # a new pin installs beside the old one
