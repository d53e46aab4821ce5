"""The aider adapter on what aider 0.86.1 really prints (``data/aider/*.txt``, captured from
the released binary against the scripted Anthropic server: ``tests/contract/test_aider.py``
makes the same runs), what it passes aider, and the fake aider's work committed without
aider's own files (issue 42)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from orchestrator.domain.lifecycle import RunState
from orchestrator.engines import aider
from orchestrator.engines.base import EngineReport, EngineTask, FailureClass, Usage
from orchestrator.recovery.gateway import ScriptedGateway

from conftest import write_ticket
from support.harness import FAKES, Harness, make_origin, write_pipeline

DATA = Path(__file__).parent / "data" / "aider"


def captured(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_a_fix_without_a_price_reports_its_usage_and_no_cost() -> None:
    """anthropic/claude-sonnet-4-6 is not in aider 0.86's price list: no "Cost:" line, so
    the orchestrator estimates the cost from [prices] (tests/execution/test_engine_cost.py).
    Two replies (the first named a file, which aider added and asked again): the server
    said 1500 + 200 input, 1800 read from the cache, 300 written to it, 20 + 40 out."""
    report = aider.ADAPTER.report(captured("success.txt"), 0, False)
    assert report == EngineReport(
        turns=2,
        cost_usd=None,
        final_message=None,
        failure=None,
        detail=None,
        usage=Usage(input_tokens=1700, output_tokens=60, cache_read_tokens=1800,
                    cache_write_tokens=300),
    )  # fmt: skip


def test_a_priced_model_reports_aiders_cost_from_its_own_line() -> None:
    # With both cache figures aider puts the cost on the line after the tokens (a run by
    # hand, outside the sandbox: a model aider has a price for, claude-sonnet-4-20250514).
    output = captured("ok-priced.txt")
    assert "cache hit, 60 received.\nCost: $0.0071 message" in output
    report = aider.ADAPTER.report(output, 0, False)
    assert (report.turns, report.cost_usd, report.failure) == (1, 0.0071, None)
    assert report.usage == Usage(1500, 60, 2000, 300)


def test_a_bad_key_is_an_auth_error_though_aider_exits_zero() -> None:
    report = aider.ADAPTER.report(captured("auth.txt"), 0, False)
    assert report.failure is FailureClass.AUTH_ERROR
    assert report.detail is not None
    assert report.detail.startswith("litellm.AuthenticationError: AnthropicException - ")
    # aider ran and no call answered: 0 turns, 0 tokens (its cost it does not say).
    assert (report.turns, report.cost_usd, report.usage) == (0, None, Usage(0, 0, 0, 0))
    # Before its banner nothing is known: a start that failed says nothing of calls.
    unstarted = aider.ADAPTER.report("Message file not found: x\n", 1, False)
    assert (unstarted.turns, unstarted.usage.known) == (None, False)


def test_an_overload_retried_as_configured_then_given_up_is_an_outage() -> None:
    output = captured("overloaded.txt")
    assert output.count("Retrying in ") == 1  # retries = 1, as the adapter set it
    report = aider.ADAPTER.report(output, 0, False)
    assert report.failure is FailureClass.OUTAGE
    assert report.detail is not None and "overloaded_error" in report.detail


@pytest.mark.parametrize(
    ("lines", "usage", "cost"),
    [
        (["Tokens: 754 sent, 37 received."], Usage(754, 37, 0, 0), None),
        (["Tokens: 12k sent, 1.2k cache write, 9.5k cache hit, 1.1k received.",
          "Cost: $0.05 message, $0.12 session."], Usage(1300, 1100, 9500, 1200), 0.12),
        (["Tokens: 2.1k sent, 312 received. Cost: $0.0087 message, $0.0087 session.",
          "Applied edit to a.py",
          "Tokens: 2.5k sent, 90 received. Cost: $0.0031 message, $0.0118 session."],
         Usage(4600, 402, 0, 0), 0.0118),
    ],
)  # fmt: skip
def test_usage_is_summed_over_the_replies(
    lines: list[str], usage: Usage, cost: float | None
) -> None:
    report = aider.ADAPTER.report("\n".join(lines) + "\n", 0, False)
    assert (report.usage, report.cost_usd) == (usage, cost)
    assert report.turns == sum(line.startswith("Tokens: ") for line in lines)


def _task(tmp_path: Path, settings: dict[str, object]) -> EngineTask:
    return EngineTask(
        ticket_id="T-7", title="Fix", kind="feature", body="Fix it.", clone_dir=tmp_path / "c",
        run_dir=tmp_path / "run", model="anthropic/claude-sonnet-4-6", settings=settings,
        attempt=2,
    )  # fmt: skip


def test_what_aider_is_given(tmp_path: Path) -> None:
    invocation = aider.ADAPTER.invocation(_task(tmp_path, {"extra_args": ["--map-tokens", "0"]}))
    argv = invocation.argv
    # Its own files out of the clone where a flag allows; usage as the provider says it.
    assert argv[argv.index("--chat-history-file") + 1] == os.devnull
    assert argv[argv.index("--input-history-file") + 1] == os.devnull
    assert {"--no-gitignore", "--no-stream", "--no-auto-commits"} <= set(argv)
    assert argv[-2:] == ("--map-tokens", "0")
    site = tmp_path / "run" / "aider-2"
    assert dict(invocation.env) == {
        "COLUMNS": "4096",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": str(site),
    }
    assert set(invocation.files) == {tmp_path / "run" / "prompt-2.txt", site / "sitecustomize.py"}


@pytest.mark.parametrize(("retries", "limit"), [({}, 0.125), ({"retries": 3}, 1.0)])
def test_the_retry_count_reaches_aiders_own_bound(
    tmp_path: Path, retries: dict[str, int], limit: float
) -> None:
    """aider has no flag for it: the sitecustomize the adapter writes sets
    ``aider.models.RETRY_TIMEOUT`` when aider imports it, where ``base_coder`` reads it
    (a stand-in ``aider`` package here; the contract test runs the real one), and the
    sitecustomize it shadows still runs."""
    invocation = aider.ADAPTER.invocation(_task(tmp_path, retries))
    for path, text in invocation.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    package = tmp_path / "lib" / "aider"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("RETRY_TIMEOUT = 60\n")
    (package / "base_coder.py").write_text("from aider.models import RETRY_TIMEOUT\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = True\n")
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join((invocation.env["PYTHONPATH"], str(package.parent),
                                       str(other))),
    }  # fmt: skip
    probe = "import aider.base_coder as b, builtins; print(b.RETRY_TIMEOUT, builtins.OTHER_SITE)"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(limit), "True"]
    # 0.125 doubled ``retries`` times is within the bound; once more is not.
    delay, made = 0.125, 0
    while (delay := delay * 2) <= limit:
        made += 1
    assert made == retries.get("retries", 0)


AIDER = (
    '[engines.aider]\nkind = "aider"\nmodels = ["anthropic/claude-sonnet-4-6"]\n'
    'pass_env = ["FAKE_ENGINE_MODE"]\n'
    '[[stages]]\nname = "implement"\nengine = "aider"\ntimeout_s = 30\n'
)


def test_aiders_own_files_are_left_out_of_the_commit_and_listed(tmp_path: Path) -> None:
    """The fake aider leaves what the real one does in the clone — its tags cache, and
    (for a user whose extra_args undo ours) its histories and a .gitignore line: the
    commit holds the fix alone and the attempt says what was left out."""
    make_origin(tmp_path, {"README.md": "hello\n", ".gitignore": "build/\n"})
    environ = {
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "DRY_RUN": "false",
        "FAKE_ENGINE_MODE": "success",
    }
    # As a user might: its chat history back in the clone, its .gitignore line back on.
    body = AIDER.replace(
        'pass_env = ["FAKE_ENGINE_MODE"]\n',
        'pass_env = ["FAKE_ENGINE_MODE"]\nsettings = { extra_args = ["--chat-history-file", '
        '".aider.chat.history.md", "--gitignore"] }\n',
    )
    h = Harness(write_pipeline(tmp_path, body), ScriptedGateway([]), environ=environ)
    record = h.run(write_ticket(tmp_path / "t", kind="feature", body="Add a greeting."))
    assert record.state is RunState.COMPLETED, record.halt
    (attempt,) = [a for a in record.attempts if a.stage == "implement"]
    assert attempt.committed_paths == ("CHANGED_BY_AIDER.txt",)
    assert attempt.committed_count == 1
    assert attempt.left_out_paths == (
        ".aider.chat.history.md",
        ".aider.tags.cache.v4/",
        ".gitignore",
    )
    assert attempt.left_out_count == 3
    assert (attempt.input_tokens, attempt.output_tokens) == (1500 + 2500, 150)
    assert (attempt.turns, attempt.cost_usd, attempt.cost_estimated) == (2, 0.0118, False)
    clone = git.Repo(record.clone_dir)
    assert list(clone.head.commit.stats.files) == ["CHANGED_BY_AIDER.txt"]
    assert clone.git.show("HEAD:.gitignore") == "build/"
