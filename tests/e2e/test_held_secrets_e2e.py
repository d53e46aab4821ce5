"""A secret the orchestrator holds is redacted by its value, in every form, from all that
leaves the process (issue 40, item 3), through the real CLI.

A review check is handed ``DEPLOY_TOKEN`` and ``DEPLOY_HOOK`` (a webhook URL, a name no
rule calls secret) by ``pass_env`` and prints both raw, reversed, base64 (alone and inside
a Basic header), URL-encoded and hex, then fails. The model retries once (the engine's
re-run is told what failed), then gives up: the run waits for a person with a hand-off.
None of those forms is in any file of the state dir (the stage logs, the run record, the
verdicts and their bundles, the ledger, the hand-off, the engine's prompts), in what the
model was asked, in what ``run`` and ``show`` print, or in the report's page. Without the held values, the
shape rules let every one of them through (the first test).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
from collections.abc import Callable, Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest
from orchestrator.redaction import HeldSecrets, redact

from conftest import write_ticket
from support.harness import ALL_AUTO, CLONE_STAGE, make_origin, reply

TOKEN = "dpl+9fK2/mQ7xR4~vL8Zq"  # no vendor's shape, too short for the random-run rule
HOOK = "https://hooks.example.com/services/T0AB12CD/B0EF34GH/Xq8rTzLm2Np7"


def forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {
        "raw": secret,
        "reversed": secret[::-1],
        "base64": base64.b64encode(raw).decode(),
        "base64 in a Basic header": base64.b64encode(b"ci:" + raw).decode(),
        "url-encoded": quote(secret, safe=""),
        "url-encoded (plus)": quote_plus(secret),
        "hex": raw.hex(),
    }


# What must be found nowhere: each form, and for the Basic header the token's bytes
# beyond the 2 at each edge that share a base64 group with a neighbour's.
def needles() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, secret in (("token", TOKEN), ("hook", HOOK)):
        for form, text in forms(secret).items():
            found[f"{name} {form}"] = text[8:-8] if form == "base64 in a Basic header" else text
    return found


CHECK = """
import base64, os, sys
from urllib.parse import quote, quote_plus
for name in ("DEPLOY_TOKEN", "DEPLOY_HOOK"):
    s = os.environ[name]
    print("got", s)
    print("backwards", s[::-1])
    print("as base64", base64.b64encode(s.encode()).decode())
    print("header Basic", base64.b64encode(b"ci:" + s.encode()).decode())
    print("quoted", quote(s, safe=""), quote_plus(s))
    print("hex", s.encode().hex())
print("AssertionError: deploy check failed", file=sys.stderr)
sys.exit(1)
"""

AGENT = "import pathlib; pathlib.Path('feature.txt').write_text('attempt')"


def _config(tmp_path: Path) -> Path:
    """The check is the repository's own script (the sandbox shows a stage its clone, not
    the test's directory); the engine is a one-line program."""
    agent = json.dumps(AGENT)
    text = (
        'state_dir = "state"\n'
        + ALL_AUTO
        + "[recovery]\nmax_diag_invocations_per_ticket = 2\nmax_retries_per_ticket = 1\n"
        + '[engines.agent]\nkind = "command"\nmodels = ["m"]\n'
        + f'command = ["{{python}}", "-c", {agent}, "{{prompt_file}}"]\n'
        + CLONE_STAGE
        + '[[stages]]\nname = "implement"\nengine = "agent"\n'
        + '[[stages]]\nname = "review"\npass_env = ["DEPLOY_TOKEN", "DEPLOY_HOOK"]\n'
        + '[[stages.checks]]\nname = "deploy"\non_red_base = "ignore"\n'
        + 'command = ["{python}", "deploy_check.py"]\n'
    )
    config = tmp_path / "config.toml"
    config.write_text(text)
    return config


class _Recording:
    """The model: answers from a script, and keeps every prompt it was sent."""

    model_name = "scripted"

    def __init__(self, replies: list[str], asked: list[str]) -> None:
        self.replies, self.asked = replies, asked

    def complete(self, request: ModelRequest) -> ModelReply:
        self.asked.append(request.prompt)
        if len(self.asked) > len(self.replies):
            return ModelReply(text=None, model=self.model_name, error="not scripted")
        text = self.replies[len(self.asked) - 1]
        return ModelReply(
            text=text, model=self.model_name, stop_reason="end_turn",
            input_tokens=len(request.prompt) // 4, output_tokens=len(text) // 4,
        )  # fmt: skip


def _cli(
    root: Path, argv: list[str], env: Mapping[str, str], gateway: _Recording
) -> subprocess.CompletedProcess[str]:
    """The CLI's ``main`` in this process, the environment exactly ``env``, the model
    ``gateway`` (as ``scripted_cli.run_here`` does, with a model that keeps its prompts)."""
    from orchestrator.app import services
    from orchestrator.cli.main import main as cli_main

    def factory(model: object, environ: Mapping[str, str]) -> Callable[[], ModelGateway]:
        return lambda: gateway

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name in set(os.environ) - set(env):
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setattr(services, "model_gateway_factory", factory)
        with redirect_stdout(out), redirect_stderr(err):
            code = cli_main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _found(text: str) -> list[str]:
    return [name for name, needle in needles().items() if needle in text]


def test_the_shape_rules_alone_let_every_form_through() -> None:
    """What this part fixes: the control for the end-to-end test below."""
    printed = "\n".join(f"{k}: {v}" for s in (TOKEN, HOOK) for k, v in forms(s).items())
    kept = _found(redact(printed, held=HeldSecrets()))
    assert [name for name in needles() if name.startswith("token")] == kept[:7]
    assert len(kept) >= 10  # (a webhook's shape is caught in some forms)
    assert _found(redact(printed, held=HeldSecrets([TOKEN, HOOK]))) == []


@pytest.mark.slow
def test_a_pass_env_secret_a_check_prints_is_nowhere(tmp_path: Path) -> None:
    make_origin(tmp_path, {"README.md": "hello\n", "deploy_check.py": CHECK})
    config = _config(tmp_path)
    ticket = write_ticket(tmp_path / "t", kind="feature", body="Deploy it.")
    asked: list[str] = []
    retry = {"action": "retry", "summary": "the deploy check failed; try again"}
    give_up = {"action": "abandon-human", "summary": "the deploy check fails every time"}
    model = _Recording([reply(retry), reply(give_up)], asked)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DRY_RUN": "false",
        "DEPLOY_TOKEN": TOKEN,
        "DEPLOY_HOOK": HOOK,
    }
    done = _cli(tmp_path, ["--config", str(config), "run", str(ticket)], env, model)
    said = done.stdout + done.stderr
    assert done.returncode == 3, said  # needs a person: the hand-off is written
    state = tmp_path / "state"
    [record_path] = [p for p in (state / "runs").glob("T-1-*.json") if p.suffixes == [".json"]]
    record = json.loads(record_path.read_text())
    run_dir = Path(record["run_dir"])

    # The check did print them, and the engine's re-run was told about its failure.
    logs = sorted(run_dir.rglob("*deploy*.log"))
    # A kept log is rewritten where it lies: each form becomes a mark of its length
    # (``[REDACTED****]``).
    assert logs and all("[REDACTED" in log.read_text() for log in logs), logs
    prompts = sorted(run_dir.glob("prompt-*.txt"))
    assert len(prompts) == 2 and "deploy" in prompts[1].read_text(), prompts
    assert len(asked) == 2
    assert (run_dir / "HANDOFF.md").is_file() or list(state.rglob("*handoff*")), said

    shown = _cli(tmp_path, ["--config", str(config), "show", record["run_id"]], env, model)
    assert shown.returncode == 0, shown.stderr
    json_shown = _cli(
        tmp_path, ["--config", str(config), "show", "--json", record["run_id"]], env, model
    )
    page = tmp_path / "report.html"
    argv = ["--config", str(config), "report", record["run_id"], "--out", str(page)]
    reported = _cli(tmp_path, argv, env, model)
    assert reported.returncode == 0 and page.is_file(), reported.stderr
    for where, text in (
        ("run's output", said),
        ("report", page.read_text()),
        ("show", shown.stdout + shown.stderr),
        ("show --json", json_shown.stdout),
        *((f"model prompt {n}", prompt) for n, prompt in enumerate(asked)),
    ):
        assert _found(text) == [], where
    leaked = {
        str(path.relative_to(tmp_path)): found
        for path in sorted(state.rglob("*"))
        if path.is_file()
        and (found := _found(path.read_bytes().decode("utf-8", "surrogateescape")))
    }
    assert leaked == {}
