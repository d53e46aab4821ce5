"""The released aider (``agents.AIDER_VERSION``) run by the orchestrator's real CLI, inside
its sandbox, against the Anthropic Messages API on the scripted server (litellm's
``anthropic/…`` provider, pointed at it by ``ANTHROPIC_API_BASE``).

Each run is one ticket in a real git repository: a clone stage, aider as the ``implement``
engine, a review check; recovery off, so one engine attempt whose class and record the
test reads. The engine's egress allow-list names only the server's ``127.0.0.1:PORT``
(besides the kind's own hosts, to which nothing is sent: the run records no egress
denial). aider is kept off the network by the adapter (no update check, no analytics,
litellm's bundled price list) and by the model's metadata given in ``extra_args`` (else
aider asks GitHub for it: its own list does not have ``claude-sonnet-4-6``). That metadata
has no price, so aider prints no cost and the orchestrator estimates it from ``[prices]``.

aider answers in its "whole" edit format here (what it uses for a model it has no
settings for): the reply names the file and gives its new content.

aider starts slowly (litellm's import alone is about 4 s of CPU), so there are four runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import git
import pytest

from .anthropic_api import Tokens, error, reply, text
from .model_server import ModelServer, Reply, Request, Script, Step
from .ticket_run import Run, pipeline, project, run_ticket

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-ant-api03-contract-test-key-not-real-aider-0123456789"
MODEL = "anthropic/claude-sonnet-4-6"
FIXED = 'GREETING = "hello"\n'
# What aider knows of the model: enough not to look it up, and no price.
METADATA = {MODEL: {"max_input_tokens": 200000, "max_output_tokens": 64000,
                    "litellm_provider": "anthropic", "mode": "chat"}}  # fmt: skip
PRICES = '[prices."claude-sonnet-4-6"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n'


class Messages:
    """Every ``POST /v1/messages`` takes the script's next step: aider's own turns carry
    no tools, so the dialect's side-request routing does not apply to them."""

    def __init__(self, steps: list[Step]) -> None:
        self.script = Script(steps)
        self.turns: list[Request] = []

    def __call__(self, request: Request) -> Reply:
        if request.method == "POST" and request.path.split("?", 1)[0].endswith("/v1/messages"):
            self.turns.append(request)
            return self.script(request)
        return error(404, f"not found: {request.path}", "not_found_error")


def run_aider(
    tmp_path: Path, aider: Path, steps: list[Step], *, retries: int = 0, timeout_s: int = 90
) -> Run:
    """One ticket through clone → implement (aider) → review, recovery off."""
    project(tmp_path, {".gitignore": "build/\n"})
    messages = Messages(steps)
    server = ModelServer(messages, lifetime_s=timeout_s + 60)
    aider_dir = tmp_path / "aider"
    aider_dir.mkdir()
    metadata = aider_dir / "model-metadata.json"
    metadata.write_text(json.dumps(METADATA))
    engine = (
        f'[engines.aider]\nkind = "aider"\nmodels = ["{MODEL}"]\n'
        f'settings = {{ retries = {retries}, extra_args = ["--model-metadata-file", '
        f'"{metadata}"] }}\n'
        'pass_env = ["ANTHROPIC_API_KEY", "ANTHROPIC_API_BASE"]\n'
        f'egress = ["{server.host_port}"]\n'
    )
    readable = [str(aider.parent.parent.resolve()), str(aider_dir)]
    config = pipeline(engine, "aider", timeout_s=timeout_s, readable=readable, head=PRICES)
    return run_ticket(
        tmp_path, config, server, messages, program=aider, deadline_s=timeout_s + 90,
        ANTHROPIC_API_KEY=FAKE_KEY, ANTHROPIC_API_BASE=server.url,
    )  # fmt: skip


def whole(path: str, content: str) -> str:
    """A reply in aider's "whole" edit format."""
    return f"{path}\n```python\n{content}```\n"


def test_a_fix_lands_goes_green_commits_no_aider_file_and_its_usage_is_estimated(
    tmp_path: Path, aider_bin: Path
) -> None:
    run = run_aider(
        tmp_path,
        aider_bin,
        [
            # Naming a file not in the chat: aider adds it (--yes-always) and asks again.
            reply(text("The greeting is spelled in greeting.py."),
                  usage=Tokens(input=1500, output=20, cache_write=300)),
            reply(text("I'll fix the spelling.\n\n" + whole("greeting.py", FIXED)),
                  usage=Tokens(input=200, output=40, cache_read=1800)),
        ],
    )  # fmt: skip
    capture(run, "success")
    assert run.record["state"] == "completed", run.output + run.log()
    clone_dir = Path(run.record["clone_dir"])
    assert (clone_dir / "greeting.py").read_text() == FIXED
    (review,) = [a for a in run.record["attempts"] if a["stage"] == "review"]
    assert [c["exit_code"] for c in review["checks"]] == [0]
    # The commit is the fix alone: no chat history, no tags cache, no .gitignore line.
    clone = git.Repo(clone_dir)
    assert list(clone.head.commit.stats.files) == ["greeting.py"]
    assert clone.git.show("HEAD:.gitignore") == "build/"
    # aider's tags cache has no flag to move it: it is in the clone, and left out.
    assert (clone_dir / ".aider.tags.cache.v4").is_dir()
    assert not (clone_dir / ".aider.chat.history.md").exists()
    attempt = run.attempt
    assert (attempt["committed_paths"], attempt["committed_count"]) == (["greeting.py"], 1)
    assert attempt["left_out_paths"] == [".aider.tags.cache.v4/"]
    # Two model calls answered; the provider's usage (--no-stream), summed; no price in
    # aider, so ours from [prices]: (1700 + 1800 + 300) * $3 + 60 * $15 per Mtok.
    assert (attempt["turns"], attempt["failure_class"]) == (2, None)
    assert (attempt["input_tokens"], attempt["output_tokens"]) == (1700, 60)
    assert (attempt["cache_read_tokens"], attempt["cache_write_tokens"]) == (1800, 300)
    assert (attempt["cost_usd"], attempt["cost_estimated"]) == (0.0123, True)
    # Nothing but the model server was asked: no update check, price list or analytics.
    assert attempt["egress"] == "proxy" and attempt["egress_denials"] == 0, attempt
    assert len(run.script.turns) == 2
    assert {r.headers.get("x-api-key") for r in run.server.requests} == {FAKE_KEY}
    assert FAKE_KEY not in json.dumps(run.record) and FAKE_KEY not in run.log()
    shown = run.show()
    assert f"implement engine=aider model={MODEL}" in shown
    assert (
        "usage: 2 turns, 1700 input + 60 output tokens (cache: 1800 read, 300 written), "
        "~$0.0123 (estimated from [prices])"
    ) in shown
    assert FAKE_KEY not in shown


def test_a_bad_key_is_an_auth_error_asked_once(tmp_path: Path, aider_bin: Path) -> None:
    run = run_aider(tmp_path, aider_bin, [error(401)] * 3, retries=2)
    capture(run, "auth")
    assert run.record["state"] == "failed", run.output
    attempt = run.attempt
    assert attempt["exit_code"] == 0  # aider exits 0 all the same
    assert attempt["failure_class"] == "auth_error"
    assert attempt["failure_detail"].startswith("litellm.AuthenticationError: AnthropicException")
    assert len(run.script.turns) == 1  # a 401 is not retried, whatever `retries` says
    # No call answered: 0 turns and tokens, as for every engine; an estimate of nothing.
    assert (attempt["turns"], attempt["input_tokens"], attempt["output_tokens"]) == (0, 0, 0)
    assert (attempt["cost_usd"], attempt["cost_estimated"]) == (0, True)
    assert attempt["committed_paths"] is None  # no commit step after a failure
    assert FAKE_KEY not in json.dumps(run.record) and FAKE_KEY not in run.log()
    assert "auth_error" in run.show()


def test_an_overloaded_api_is_an_outage_after_the_configured_retries(
    tmp_path: Path, aider_bin: Path
) -> None:
    """``retries = 1`` reaches aider's own retry loop (its RETRY_TIMEOUT, set by the
    adapter's sitecustomize): two requests, not aider's own nine over a minute."""
    run = run_aider(tmp_path, aider_bin, [error(529)] * 5, retries=1)
    capture(run, "overloaded")
    attempt = run.attempt
    assert attempt["failure_class"] == "outage"
    assert "overloaded_error" in attempt["failure_detail"]
    assert len(run.script.turns) == 2
    assert run.log().count("Retrying in ") == 1
    assert attempt["duration_s"] < 60


def test_a_hung_api_is_stopped_by_the_stage_timeout(tmp_path: Path, aider_bin: Path) -> None:
    """The call never answers: our timeout ends aider (its own request timeout is ten
    minutes), and nothing is committed."""
    run = run_aider(tmp_path, aider_bin, [Reply.hanging()], timeout_s=25)
    attempt = run.attempt
    assert (attempt["timed_out"], attempt["failure_class"]) == (True, "timeout")
    assert len(run.script.turns) == 1
    assert attempt["turns"] == 0 and attempt["committed_paths"] is None


CAPTURE = "ORCHESTRATOR_CONTRACT_CAPTURE"


def capture(run: Run, name: str) -> None:
    """With ``$ORCHESTRATOR_CONTRACT_CAPTURE`` set to a directory, aider's output (its
    step of the attempt's log, between the orchestrator's own lines) is written there as
    ``aider-NAME.txt``, scrubbed of what is this machine's (paths, the port)."""
    where = os.environ.get(CAPTURE)
    if not where:
        return
    log = run.log().splitlines()
    start = next(i for i, line in enumerate(log) if line.startswith("# $ aider "))
    end = next(i for i, line in enumerate(log) if i > start and line.startswith("# orchestrator: "))
    text = "\n".join(log[start + 1 : end]) + "\n"
    text = text.replace(run.record["clone_dir"], "/work/clone")
    text = text.replace(str(run.config.parent), "/work")
    text = text.replace(run.server.host_port, "127.0.0.1:8080")
    text = re.sub(r"object at 0x[0-9a-f]+", "object at 0x7f0000000000", text)
    Path(where, f"aider-{name}.txt").write_text(text)
