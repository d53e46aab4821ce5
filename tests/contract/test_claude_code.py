"""The released Claude Code (``agents.CLAUDE_CODE_VERSION``) run by the orchestrator's real
CLI, inside its sandbox, against the scripted Messages API on loopback.

Each run is one ticket in a real git repository: a clone stage, Claude Code as the
``implement`` engine, a review check. Recovery is off, so each run is one engine attempt
whose class and record the test reads. The engine's egress allow-list names the model
server's ``127.0.0.1:PORT``; the kind's own ``api.anthropic.com`` stays on it too
(``domain/egress.ENGINE_HOSTS`` has no way to drop it), but nothing is sent there:
``ANTHROPIC_BASE_URL`` points at the server and non-essential traffic (telemetry, error
reports, update checks) is off. With those, Claude Code 2.1.332 sends only its turns
(tried by hand with every other connection sent to a dead proxy), and each test counts
them at the server. The fake API key reaches Claude Code only by the engine's ``pass_env``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import git
import pytest

from .anthropic_api import Tokens, anthropic_server, error, reply, text, tool_use
from .model_server import Reply, Step
from .ticket_run import Run, pipeline, project, run_ticket

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-ant-api03-contract-test-key-not-real-0123456789"
MODEL = "claude-sonnet-4-6"
FIXED = 'GREETING = "hello"\n'
# Claude Code's own switches for a run that talks to its model and nothing else.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}


def run_claude(
    tmp_path: Path,
    claude: Path,
    steps: list[Step],
    *,
    settings: str = "",
    timeout_s: int = 60,
) -> Run:
    """One ticket through clone → implement (Claude Code) → review, recovery off."""
    project(tmp_path)
    server, script = anthropic_server(steps, lifetime_s=timeout_s + 60)
    quiet = ", ".join(f'"{name}"' for name in QUIET)
    engine = (
        f'[engines.claude]\nkind = "claude-code"\nmodels = ["{MODEL}"]\n'
        f'settings = {{ permission_mode = "acceptEdits"{settings} }}\n'
        f'pass_env = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", {quiet}]\n'
        f'egress = ["{server.host_port}"]\n'
    )
    config = pipeline(engine, "claude", timeout_s=timeout_s, readable=[str(claude.parent.parent)])
    return run_ticket(
        tmp_path, config, server, script, program=claude, deadline_s=timeout_s + 60,
        ANTHROPIC_API_KEY=FAKE_KEY, ANTHROPIC_BASE_URL=server.url, **QUIET,
    )  # fmt: skip


def test_a_fix_lands_goes_green_and_its_usage_is_recorded_and_shown(
    tmp_path: Path, claude_bin: Path
) -> None:
    edit = {"file_path": "greeting.py", "old_string": "helo", "new_string": "hello"}
    run = run_claude(
        tmp_path,
        claude_bin,
        [
            reply(
                text("I'll fix the spelling."),
                tool_use("Edit", edit),
                usage=Tokens(input=1000, output=50, cache_read=200, cache_write=300),
            ),
            reply(text("Fixed the greeting."), usage=Tokens(input=20, output=10, cache_read=1200)),
        ],
    )
    capture(run, "success")
    assert run.record["state"] == "completed", run.output
    # Claude Code's Edit tool changed the file; the commit is that change; the check is green.
    clone = git.Repo(run.record["clone_dir"])
    assert (Path(run.record["clone_dir"]) / "greeting.py").read_text() == FIXED
    assert list(clone.head.commit.stats.files) == ["greeting.py"]
    (review,) = [a for a in run.record["attempts"] if a["stage"] == "review"]
    assert [c["exit_code"] for c in review["checks"]] == [0]
    # Two model calls answered; usage from Claude Code's own result; its own cost.
    attempt = run.attempt
    assert (attempt["turns"], attempt["failure_class"]) == (2, None)
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (1020, 60)
    assert (attempt["cache_read_tokens"], attempt["cache_write_tokens"]) == (1400, 300)
    assert (attempt["cost_usd"], attempt["cost_estimated"]) == (0.005505, False)
    assert attempt["final_message"] == "Fixed the greeting."
    # Every request was the agent's own turn, to the server, with the key pass_env gave.
    assert run.server.paths() == ["/v1/messages?beta=true"] * 2
    assert {r.headers.get("x-api-key") for r in run.server.requests} == {FAKE_KEY}
    # The key never reaches the record or the log.
    assert FAKE_KEY not in json.dumps(run.record) and FAKE_KEY not in run.log()
    shown = run.show()
    assert "implement engine=claude model=claude-sonnet-4-6" in shown
    assert (
        "usage: 2 turns, 1020 input + 60 output tokens (cache: 1400 read, 300 written), $0.0055"
        in shown
    )
    assert FAKE_KEY not in shown


def test_a_bad_key_is_an_auth_error_asked_once(tmp_path: Path, claude_bin: Path) -> None:
    run = run_claude(tmp_path, claude_bin, [error(401)] * 3, settings=", retries = 2")
    capture(run, "auth")
    assert run.record["state"] == "failed", run.output
    attempt = run.attempt
    assert attempt["failure_class"] == "auth_error"
    assert attempt["failure_detail"] == "Invalid API key · Fix external API key"
    assert len(run.script.turns) == 1  # a 401 is not retried, whatever `retries` says
    assert (attempt["turns"], attempt["input_tokens"], attempt["output_tokens"]) == (0, 0, 0)
    assert attempt["cost_usd"] == 0 and not attempt["cost_estimated"]
    assert FAKE_KEY not in json.dumps(run.record) and FAKE_KEY not in run.log()
    shown = run.show()
    assert (
        "reason: the provider refused the key or login (auth_error): "
        "Invalid API key · Fix external API key"
    ) in shown
    assert FAKE_KEY not in shown


def test_an_overloaded_api_is_an_outage_after_the_configured_retries(
    tmp_path: Path, claude_bin: Path
) -> None:
    """``retries = 2`` reaches Claude Code as CLAUDE_CODE_MAX_RETRIES: three requests (a
    503, then 529s), not its own default of eleven, and the attempt is ``outage``."""
    run = run_claude(
        tmp_path,
        claude_bin,
        [error(503), error(529), error(529), error(529), error(529)],
        settings=", retries = 2",
    )
    capture(run, "overloaded")
    assert run.record["state"] == "failed", run.output
    attempt = run.attempt
    assert len(run.script.turns) == 3
    # Claude Code says so itself: each retry's event names the allowance it was given.
    assert run.log().count('"subtype":"api_retry","attempt":') == 2
    assert '"max_retries":2' in run.log()
    assert attempt["failure_class"] == "outage"
    assert attempt["failure_detail"].startswith("API Error: 529 Overloaded.")
    assert attempt["turns"] == 0


def test_a_hung_api_is_stopped_by_the_stage_timeout(tmp_path: Path, claude_bin: Path) -> None:
    """One call answers (a Read), the next never does: our timeout ends it, and what the
    answered call used is still recorded (its output tokens are not known without a result)."""
    read = {"file_path": "greeting.py"}
    run = run_claude(
        tmp_path,
        claude_bin,
        [
            reply(tool_use("Read", read), usage=Tokens(input=500, output=30, cache_write=100)),
            Reply.hanging(),
        ],
        timeout_s=6,
    )
    capture(run, "timeout")
    attempt = run.attempt
    assert (attempt["timed_out"], attempt["failure_class"]) == (True, "timeout")
    assert len(run.script.turns) == 2
    assert attempt["turns"] == 1
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (500, None)
    assert attempt["cache_write_tokens"] == 100


def test_the_turn_limit_stops_it_as_a_code_failure(tmp_path: Path, claude_bin: Path) -> None:
    read = {"file_path": "greeting.py"}
    run = run_claude(
        tmp_path,
        claude_bin,
        [reply(tool_use("Read", read), usage=Tokens(input=400, output=25))] * 3,
        settings=", max_turns = 2",
    )
    capture(run, "max_turns")
    attempt = run.attempt
    assert attempt["failure_class"] == "code"
    assert attempt["failure_detail"] == "Reached maximum number of turns (2)"
    # Two calls answered; Claude Code's own num_turns says 3 (it counts the refused one).
    assert len(run.script.turns) == 2 and attempt["turns"] == 2
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (800, 50)
    assert attempt["cost_usd"] == pytest.approx(0.00315)  # 800 in, 50 out at $3/$15 per Mtok


CAPTURE = "ORCHESTRATOR_CONTRACT_CAPTURE"


def capture(run: Run, name: str) -> None:
    """With ``$ORCHESTRATOR_CONTRACT_CAPTURE`` set to a directory, Claude Code's output
    (its JSON lines) is written there as ``NAME.jsonl``, scrubbed of what is this
    machine's (paths, ids, times, the port): the test data of the adapter's unit tests."""
    where = os.environ.get(CAPTURE)
    if not where:
        return
    lines = [line for line in run.log().splitlines() if line.startswith("{")]
    clone = run.record["clone_dir"]
    text = "\n".join(lines) + "\n"
    text = text.replace(clone, "/work/clone").replace(str(run.config.parent), "/work")
    text = text.replace(run.server.host_port, "127.0.0.1:8080")
    text = re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "00000000-0000-4000-8000-000000000000",
        text,
    )
    text = re.sub(r'"timestamp":"[^"]*"', '"timestamp":"2026-01-01T00:00:00.000Z"', text)
    text = re.sub(r"-tmp-pytest-of-[^/\"]*", "-work-clone", text)
    Path(where, f"{name}.jsonl").write_text(text)
