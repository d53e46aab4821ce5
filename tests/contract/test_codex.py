"""The released Codex (``agents.CODEX_VERSION``) run by the orchestrator's real CLI, inside
its sandbox, against the scripted Responses API on loopback.

Each run is one ticket in a real git repository: a clone stage, Codex as the
``implement`` engine with its documented ``sandbox = "workspace-write"`` (Codex's own
sandbox, inside ours), a review check. Recovery is off, so each run is one engine attempt
whose class and record the test reads. The engine's ``base_url`` points Codex's provider
at the server, which also makes the server's ``127.0.0.1:PORT`` the only host on the
egress allow-list (``stage_hosts``: the URL's host replaces OpenAI's); Codex's analytics,
plugins and apps are off (its other traffic), and every request it made is counted at the
server. The fake API key reaches Codex only by the engine's ``pass_env``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import git
import pytest

from .model_server import Reply, Step
from .openai_api import (
    MODEL,
    Tokens,
    apply_patch,
    error,
    exec_command,
    message,
    openai_server,
    reasoning,
    respond,
)
from .ticket_run import BROKEN, Run, pipeline, project, run_ticket

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-proj-contract-test-key-not-real-0123456789abcdef"
FIXED = 'GREETING = "hello"\n'
FIX = (
    "*** Begin Patch\n*** Update File: greeting.py\n@@\n"
    '-GREETING = "helo"\n+GREETING = "hello"\n*** End Patch\n'
)


def run_codex(
    tmp_path: Path,
    codex: Path,
    steps: list[Step],
    *,
    settings: str = "",
    timeout_s: int = 60,
    egress: str = "",
) -> Run:
    """One ticket through clone → implement (Codex) → review, recovery off."""
    project(tmp_path)
    server, script = openai_server(steps, lifetime_s=timeout_s + 60)
    engine = (
        f'[engines.codex]\nkind = "codex"\nmodels = ["{MODEL}"]\n'
        f'settings = {{ sandbox = "workspace-write", base_url = "{server.url}/v1"'
        f"{settings} }}\n"
        'pass_env = ["OPENAI_API_KEY"]\n'
        f"{egress}"
    )
    prices = f'[prices."{MODEL}"]\ninput_per_mtok = 1.25\noutput_per_mtok = 10.0\n'
    config = pipeline(
        engine, "codex", timeout_s=timeout_s, head=prices,
        readable=[str(codex.resolve().parent.parent.parent.parent)],
    )  # fmt: skip
    return run_ticket(
        tmp_path, config, server, script, program=codex, deadline_s=timeout_s + 60,
        OPENAI_API_KEY=FAKE_KEY,
    )  # fmt: skip


def test_a_fix_lands_in_codexs_own_sandbox_goes_green_and_is_recorded_and_shown(
    tmp_path: Path, codex_bin: Path
) -> None:
    """Codex's workspace-write sandbox starts inside ours (it needs a unix datagram
    socket: ``sandbox_launch``) and its apply_patch edits the clone."""
    run = run_codex(
        tmp_path,
        codex_bin,
        [
            respond(
                reasoning("Fixing the spelling."), apply_patch(FIX),
                usage=Tokens(input=1000, output=50, cached=200),
            ),
            respond(message("Fixed the greeting."), usage=Tokens(input=1100, output=10, cached=900)),
        ],
    )  # fmt: skip
    capture(run, "success")
    assert run.record["state"] == "completed", run.output
    clone = git.Repo(run.record["clone_dir"])
    assert (Path(run.record["clone_dir"]) / "greeting.py").read_text() == FIXED
    assert list(clone.head.commit.stats.files) == ["greeting.py"]
    (review,) = [a for a in run.record["attempts"] if a["stage"] == "review"]
    assert [c["exit_code"] for c in review["checks"]] == [0]
    attempt = run.attempt
    # Two model calls answered; tokens from turn.completed (the cached part apart); Codex
    # says no cost, so it is estimated from [prices] and marked so.
    assert (attempt["turns"], attempt["failure_class"]) == (2, None)
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (1000, 60)
    assert (attempt["cache_read_tokens"], attempt["cache_write_tokens"]) == (1100, 0)
    assert attempt["cost_estimated"] is True
    assert attempt["cost_usd"] == pytest.approx((2100 * 1.25 + 60 * 10.0) / 1e6)
    assert attempt["final_message"] == "Fixed the greeting."
    # Every request was the agent's own, to the server, with the key pass_env gave;
    # nothing was refused by the egress proxy (Codex tried no other host).
    assert run.server.paths() == ["/v1/responses"] * 2
    assert {r.headers.get("authorization") for r in run.server.requests} == {f"Bearer {FAKE_KEY}"}
    assert attempt.get("egress_denials", 0) == 0, attempt.get("egress_denied")
    assert FAKE_KEY not in json.dumps(run.record) and FAKE_KEY not in run.log()
    shown = run.show()
    assert f"implement engine=codex model={MODEL}" in shown
    assert (
        "usage: 2 turns, 1000 input + 60 output tokens (cache: 1100 read), ~$0.0032 "
        "(estimated from [prices])"
    ) in shown
    assert FAKE_KEY not in shown


def test_a_bad_key_is_an_auth_error_and_an_overload_an_outage_after_the_retries(
    tmp_path: Path, codex_bin: Path
) -> None:
    """``retries = 1`` reaches Codex as its provider's ``request_max_retries``: a 401 is
    asked once (Codex retries only what may pass), an overload twice (503, then 529),
    then ``outage``; its whole-turn retry (``stream_max_retries``) is off, or each would
    be asked again."""
    bad_key = run_codex(tmp_path / "auth", codex_bin, [error(401)] * 3, settings=", retries = 1")
    capture(bad_key, "auth")
    assert bad_key.record["state"] == "failed", bad_key.output
    attempt = bad_key.attempt
    assert attempt["failure_class"] == "auth_error"
    assert attempt["failure_detail"].startswith("unexpected status 401 Unauthorized")
    assert len(bad_key.script.turns) == 1
    assert (attempt["turns"], attempt["input_tokens"]) == (0, None)
    assert FAKE_KEY not in json.dumps(bad_key.record) and FAKE_KEY not in bad_key.log()
    shown = bad_key.show()
    assert (
        "reason: the provider refused the key or login (auth_error): unexpected status 401 "
        "Unauthorized: Incorrect API key provided"
    ) in shown
    assert "usage: 0 turns" in shown and FAKE_KEY not in shown

    overloaded = run_codex(
        tmp_path / "overload", codex_bin, [error(503), error(529), error(529), error(529)],
        settings=", retries = 1",
    )  # fmt: skip
    capture(overloaded, "overloaded")
    attempt = overloaded.attempt
    assert len(overloaded.script.turns) == 2
    assert attempt["failure_class"] == "outage", overloaded.log()
    assert "529" in attempt["failure_detail"]
    assert attempt["turns"] == 0
    assert (
        "reason: the provider was overloaded or down (outage): unexpected status 529"
        in overloaded.show()
    )


def test_a_hung_api_is_stopped_by_the_stage_timeout(tmp_path: Path, codex_bin: Path) -> None:
    """One call answers (a command), the next never does: our timeout ends it; the call
    that answered is counted, and no usage is known (Codex says it only at turn end)."""
    run = run_codex(
        tmp_path,
        codex_bin,
        [respond(exec_command("cat greeting.py"), usage=Tokens(input=500)), Reply.hanging()],
        timeout_s=8,
    )
    capture(run, "timeout")
    attempt = run.attempt
    assert (attempt["timed_out"], attempt["failure_class"]) == (True, "timeout")
    assert len(run.script.turns) == 2
    assert attempt["turns"] == 1
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (None, None)
    shown = run.show()
    assert "usage: 1 turn\n" in shown
    assert "reason: the stage's timeout stopped it (timeout)" in shown


def test_a_file_change_codex_could_not_write_fails_the_attempt(
    tmp_path: Path, codex_bin: Path
) -> None:
    """The issue's own failure, made the one way it can still happen: with ``egress =
    ["*"]`` the sandbox shares the host's network (no proxy, so the host's abstract unix
    sockets are in reach) and is given no unix datagram socket, so Codex's own sandbox
    cannot start and its apply_patch fails. That is ``config_error`` (a person changes
    the sandbox setting; a retry fails the same way), never a success. The network is
    the host's here, but Codex reaches only the server: its base_url is the server, its
    other traffic is switched off (under the proxy, the first test's run is refused
    nothing with the same switches), and the server counts every request."""
    run = run_codex(
        tmp_path,
        codex_bin,
        [respond(apply_patch(FIX)), respond(message("Fixed the greeting."))],
        egress='egress = ["*"]\n',
    )
    capture(run, "file_change_failed")
    attempt = run.attempt
    assert attempt["egress"] == "open"
    assert (Path(run.record["clone_dir"]) / "greeting.py").read_text() == BROKEN
    assert attempt["exit_code"] == 0  # Codex itself calls this run a success
    assert attempt["failure_class"] == "config_error", run.log()
    assert attempt["failure_detail"] == (
        "codex could not write greeting.py: its file change failed (Codex's own sandbox or "
        "the file system refused the write)"
    )
    assert run.record["state"] == "failed"
    shown = run.show()
    assert f"implement engine=codex model={MODEL}" in shown and "(whole network)" in shown
    assert "(config_error): codex could not write greeting.py: its file change failed" in shown


CAPTURE = "ORCHESTRATOR_CONTRACT_CAPTURE"


def capture(run: Run, name: str) -> None:
    """With ``$ORCHESTRATOR_CONTRACT_CAPTURE`` set to a directory, Codex's output (its
    JSON lines) is written there as ``NAME.jsonl``, scrubbed of what is this machine's
    (paths, ids, the port): the test data of the adapter's unit tests."""
    where = os.environ.get(CAPTURE)
    if not where:
        return
    lines = [line for line in run.log().splitlines() if line.startswith("{")]
    text = "\n".join(lines) + "\n"
    text = text.replace(run.record["clone_dir"], "/work/clone")
    text = text.replace(str(run.config.parent), "/work")
    text = text.replace(run.server.host_port, "127.0.0.1:8080")
    text = re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "00000000-0000-4000-8000-000000000000",
        text,
    )
    Path(where, f"{name}.jsonl").write_text(text)
