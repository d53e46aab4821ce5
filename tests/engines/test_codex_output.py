"""The Codex adapter on what the released Codex 0.171.0 printed in the contract tests
(``tests/contract/test_codex.py``, captured in ``data/codex/``), and on the argv it builds:
the provider entry that carries the base URL, the key's variable and the retry count."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from orchestrator.domain.config import parse_config
from orchestrator.domain.stage_hosts import egress_hosts
from orchestrator.engines import codex
from orchestrator.engines.base import EngineTask, FailureClass, Usage
from orchestrator.engines.codex import ADAPTER, model_calls

DATA = Path(__file__).parent / "data" / "codex"


def captured(name: str) -> str:
    return (DATA / f"{name}.jsonl").read_text()


def test_a_fix_codex_wrote_is_a_success_with_its_calls_and_tokens() -> None:
    report = ADAPTER.report(captured("success"), 0, False)
    assert (report.failure, report.detail) == (None, None)
    assert report.final_message == "Fixed the greeting."
    # A reasoning and a file change, then the answer: two model calls.
    assert report.turns == 2
    # 2,100 in of which 1,100 read from the cache; Codex says no cost.
    assert report.usage == Usage(
        input_tokens=1000, output_tokens=60, cache_read_tokens=1100, cache_write_tokens=0
    )
    assert report.cost_usd is None


def test_a_file_change_codex_could_not_write_is_a_config_error_though_it_exited_zero() -> None:
    report = ADAPTER.report(captured("file_change_failed"), 0, False)
    assert report.failure is FailureClass.CONFIG_ERROR
    assert report.detail == (
        "codex could not write /work/clone/greeting.py: its file change failed (Codex's own "
        "sandbox or the file system refused the write)"
    )
    # In the log the runner's header names the clone: the path is said inside it.
    logged = "# orchestrator: 2026-01-01T00:00:00+00:00 cwd=/work/clone\n# $ codex exec\n"
    in_log = ADAPTER.report(logged + captured("file_change_failed"), 0, False)
    assert in_log.detail is not None and in_log.detail.startswith(
        "codex could not write greeting.py:"
    )
    assert report.final_message == "Fixed the greeting."  # what the model believed
    assert report.turns == 2


@pytest.mark.parametrize(
    ("name", "failure", "starts"),
    [
        ("auth", FailureClass.AUTH_ERROR, "unexpected status 401 Unauthorized: Incorrect API"),
        ("overloaded", FailureClass.OUTAGE, "unexpected status 529 <unknown status code>"),
    ],
)
def test_a_failed_request_is_its_infrastructure_class_with_no_call_answered(
    name: str, failure: FailureClass, starts: str
) -> None:
    report = ADAPTER.report(captured(name), 1, False)
    assert report.failure is failure
    assert report.detail is not None and report.detail.startswith(starts)
    assert report.turns == 0 and report.usage == Usage()


# Codex 0.171.0 run without the variable its provider's env_key names (no pass_env).
NO_KEY = """\
{"type":"thread.started","thread_id":"00000000-0000-4000-8000-000000000000"}
{"type":"turn.started"}
{"type":"error","message":"Missing environment variable: `OPENAI_API_KEY`."}
{"type":"turn.failed","error":{"message":"Missing environment variable: `OPENAI_API_KEY`."}}
"""


def test_a_key_that_is_not_passed_is_an_auth_error_not_code() -> None:
    report = ADAPTER.report(NO_KEY, 0, False)
    assert report.failure is FailureClass.AUTH_ERROR
    assert report.detail == (
        "codex found no API key: OPENAI_API_KEY is not set (name it in the engine's pass_env)"
    )


def test_a_hang_is_a_timeout_that_keeps_the_call_that_answered() -> None:
    report = ADAPTER.report(captured("timeout"), 124, True)
    assert (report.failure, report.turns, report.usage) == (FailureClass.TIMEOUT, 1, Usage())


@pytest.mark.parametrize(
    ("kinds", "calls"),
    [
        ([], 0),
        (["agent_message"], 1),
        (["file_change", "agent_message"], 2),
        (["reasoning", "agent_message", "command_execution", "agent_message"], 2),
        (["reasoning", "command_execution", "reasoning", "file_change", "agent_message"], 3),
        # Parallel tool calls of one answer are one call; Codex's warnings are not calls.
        (["error", "reasoning", "command_execution", "command_execution", "agent_message"], 2),
    ],
)
def test_model_calls_are_counted_from_what_each_answer_produced(
    kinds: list[str], calls: int
) -> None:
    assert model_calls([{"type": kind} for kind in kinds]) == calls


def task(tmp_path: Path, **settings: object) -> EngineTask:
    return EngineTask(
        ticket_id="T-1", title="Fix it", kind="bug-fix", body="Fix it.", clone_dir=tmp_path,
        run_dir=tmp_path / "run", model="gpt-5.5", settings=settings, attempt=1,
    )  # fmt: skip


def provider(argv: tuple[str, ...]) -> dict[str, object]:
    """The provider entry the argv defines, parsed as Codex parses a ``-c`` value."""
    (entry,) = [a for a in argv if a.startswith("model_providers.")]
    key, _, value = entry.partition("=")
    assert key == "model_providers.orchestrator"
    parsed: dict[str, object] = tomllib.loads(f"entry = {value}")["entry"]
    return parsed


def test_codex_is_pointed_at_its_provider_with_the_retry_count(tmp_path: Path) -> None:
    argv = ADAPTER.invocation(task(tmp_path, extra_args=["--skip-git-repo-check"])).argv
    assert argv[:7] == ("codex", "exec", "--json", "-m", "gpt-5.5", "--sandbox", "workspace-write")
    assert argv[-12:] == (
        "-c", 'model_provider="orchestrator"',
        # Codex's analytics and plugins stay off: a run talks to its model and nothing else.
        "-c", "analytics.enabled=false",
        "--disable", "plugins", "--disable", "apps", "--disable", "remote_plugin",
        "--skip-git-repo-check", "-",
    )  # fmt: skip
    assert provider(argv) == {
        "name": "orchestrator", "base_url": "https://api.openai.com/v1",
        "env_key": "OPENAI_API_KEY", "wire_api": "responses",
        "request_max_retries": 0, "stream_max_retries": 0,
    }  # fmt: skip
    moved = ADAPTER.invocation(
        task(tmp_path, base_url="http://127.0.0.1:8080/v1", env_key="AZURE_KEY", retries=3)
    ).argv
    assert provider(moved) == {
        "name": "orchestrator", "base_url": "http://127.0.0.1:8080/v1",
        "env_key": "AZURE_KEY", "wire_api": "responses",
        "request_max_retries": 3, "stream_max_retries": 0,
    }  # fmt: skip


def test_the_base_url_and_the_key_variable_are_checked_at_load() -> None:
    assert ADAPTER.check_settings({"base_url": "https://llm.example.com/v1"}) == []
    assert ADAPTER.check_settings({"base_url": 'http://x/"}, y={', "env_key": "OPENAI KEY"}) == [
        "base_url: must be an http:// or https:// URL (got 'http://x/\"}, y={')",
        "env_key: must be an environment variable's name (got 'OPENAI KEY')",
    ]
    assert ADAPTER.check_settings({"base_url": "ftp://x"}) == [
        "base_url: must be an http:// or https:// URL (got 'ftp://x')"
    ]
    assert codex.PROVIDER == "orchestrator"


def test_a_base_url_is_what_the_engine_reaches_instead_of_openai() -> None:
    config = parse_config(
        '[engines.cx]\nkind = "codex"\nmodels = ["gpt-5.5"]\n'
        'settings = { base_url = "http://127.0.0.1:8080/v1" }\negress = ["mcp.example.com"]\n'
        '[engines.plain]\nkind = "codex"\nmodels = ["gpt-5.5"]\n'
        '[[stages]]\nname = "implement"\nengine = "cx"\n',
        Path("c.toml"),
    )
    (implement,) = config.stages
    assert egress_hosts(implement, config, "cx", "/srv/repo.git", {}) == (
        "127.0.0.1:8080", "mcp.example.com",
    )  # fmt: skip
    assert egress_hosts(implement, config, "plain", "/srv/repo.git", {}) == (
        "api.openai.com", "chatgpt.com",
    )  # fmt: skip
