"""A re-run is told what failed (issue 27, part 1), through the real CLI.

The engine is a stand-in for a real agent: a script that writes a test and an
implementation, and gets the implementation right only when its prompt names the test
that failed and the assertion it failed with. Without the "previous attempt" section a
re-run is a re-roll and recovers nothing; with it, every re-run action recovers. An
engine that ignores what it is told still costs no more than the caps allow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.domain.runs import RunRecord

from conftest import write_ticket
from support.harness import ALL_AUTO, CLONE_STAGE, make_origin, reply
from support.scripted_cli import CALLS_ENV, SCRIPT_ENV, requests_made, run_here

pytestmark = pytest.mark.slow

# The agent. Its first attempt rounds the VAT; told "test_price_includes_vat" and the
# assertion's message, it keeps the cents. ``ignore`` plays an engine that never reads
# what it is told.
AGENT = """
import pathlib, sys
prompt = pathlib.Path(sys.argv[1]).read_text()
pathlib.Path("tests").mkdir(exist_ok=True)
pathlib.Path("tests/test_vat.py").write_text(
    "import unittest\\nfrom shop import price\\n\\n"
    "class VatTest(unittest.TestCase):\\n"
    "    def test_price_includes_vat(self):\\n"
    "        self.assertEqual(price(999), 1198.8, 'VAT is added to the cent')\\n"
)
told = "test_price_includes_vat" in prompt and "1199 != 1198.8" in prompt
if told and sys.argv[2] != "ignore":
    body = "round(net * 1.2, 2)"
else:
    body = "round(net * 1.2)"
pathlib.Path("shop.py").write_text(f"def price(net):\\n    return {body}\\n")
pathlib.Path("PROMPTS_SEEN").open("a").write(str(told) + "\\n")
"""

SHOP = {
    "shop.py": "def price(net):\n    return net\n",
    "tests/__init__.py": "",
    "tests/test_shop.py": (
        "import unittest\nfrom shop import price\n\n"
        "class ShopTest(unittest.TestCase):\n"
        "    def test_zero_is_free(self):\n        self.assertEqual(price(0), 0)\n"
    ),
}


def _config(tmp_path: Path, *, feedback: bool, mode: str) -> Path:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    command = f'["{{python}}", "{agent}", "{{prompt_file}}", "{mode}"]'
    text = (
        'state_dir = "state"\n'
        + ALL_AUTO
        + "[recovery]\nmax_diag_invocations_per_ticket = 2\nmax_retries_per_ticket = 2\n"
        + f"engine_feedback = {'true' if feedback else 'false'}\n"
        + f'[engines.agent]\nkind = "command"\nmodels = ["small", "large"]\ncommand = {command}\n'
        + f'[engines.other]\nkind = "command"\nmodels = ["x"]\ncommand = {command}\n'
        + CLONE_STAGE
        + '[[stages]]\nname = "implement"\nengine = "agent"\n'
        # The agent's script lies beside the config: shown to the stage only by name.
        + 'readable = ["{root}/agent.py"]\n'
        + '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "project-tests"\n'
        + 'command = ["{python}", "-m", "unittest", "discover", "-s", "tests", "-t", "."]\n'
    )
    config = tmp_path / "config.toml"
    config.write_text(text)
    return config


def _run(tmp_path: Path, verdicts: list[dict[str, object]], *, feedback: bool, mode: str = "use"):
    make_origin(tmp_path, SHOP)
    config = _config(tmp_path, feedback=feedback, mode=mode)
    ticket = write_ticket(tmp_path / "t", kind="feature", body="Prices include 20 % VAT.")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([reply(v) for v in verdicts]))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DRY_RUN": "false",
        SCRIPT_ENV: str(script),
        CALLS_ENV: str(tmp_path / "calls"),
    }
    done = run_here(tmp_path, ["--config", str(config), "run", str(ticket)], env)
    [path] = [
        p for p in (tmp_path / "state" / "runs").glob("T-1-*.json") if p.suffixes == [".json"]
    ]
    record = RunRecord.model_validate_json(path.read_text())
    return done.returncode, record, requests_made(tmp_path / "calls"), done.stdout + done.stderr


RERUNS = {
    "retry": {"action": "retry", "summary": "the VAT is rounded to whole units"},
    "escalate-model": {"action": "escalate-model", "summary": "needs a stronger model"},
    "switch-engine": {"action": "switch-engine", "engine": "other", "summary": "try the other"},
}
GIVE_UP = {"action": "abandon-human", "summary": "the same failure again"}


@pytest.mark.parametrize("action", sorted(RERUNS))
def test_a_rerun_told_what_failed_recovers(tmp_path: Path, action: str) -> None:
    code, record, calls, said = _run(tmp_path, [RERUNS[action], GIVE_UP], feedback=True)
    assert (code, str(record.state)) == (0, "completed"), said
    assert calls == 1  # one diagnosis; the re-run fixed it
    prompts = sorted(Path(record.run_dir).glob("prompt-*.txt"))
    first, second = (p.read_text() for p in prompts)
    assert "previous attempt" not in first
    # What it was told came from the decision's files: the check, its evidence, the
    # verdict's summary, the previous change.
    assert "The review check `project-tests` failed" in second
    assert "AssertionError: 1199 != 1198.8 : VAT is added to the cent" in second
    assert RERUNS[action]["summary"] in second
    assert "+    return round(net * 1.2)" in second
    assert record.feedback == {"implement": 1}


def test_without_feedback_a_rerun_is_a_re_roll(tmp_path: Path) -> None:
    """The 0 %: the same scenario with the section switched off. (escalate-model and
    switch-engine re-run with the very same prompt too: the prompt names neither the
    engine nor the model.)"""
    code, record, calls, said = _run(tmp_path, [RERUNS["retry"], GIVE_UP], feedback=False)
    assert (code, str(record.state)) == (3, "needs-human"), said
    assert calls == 2 and record.feedback == {}
    first, second = (p.read_text() for p in sorted(Path(record.run_dir).glob("prompt-*.txt")))
    assert first == second  # byte-identical: nothing learned


def test_an_engine_that_ignores_feedback_costs_no_more_than_the_caps(tmp_path: Path) -> None:
    code, record, calls, said = _run(
        tmp_path, [RERUNS["retry"], RERUNS["retry"], RERUNS["retry"]], feedback=True,
        mode="ignore",
    )  # fmt: skip
    assert (code, str(record.state)) == (4, "failed"), said
    assert record.halt is not None and record.halt.reason == "cap_exhausted"
    assert calls == 2  # max_diag_invocations_per_ticket
    engine_runs = [a for a in record.attempts if a.stage == "implement"]
    assert len(engine_runs) == 3  # the first, and max_retries_per_ticket (2) re-runs
    assert record.feedback == {"implement": 2}  # the latest failure is what it is told
    # The second decision was taken after a re-run that carried feedback: replay, from
    # the files alone, reaches the same decisions and dispatches.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    replayed = run_here(tmp_path, ["--config", "config.toml", "replay", record.run_id], env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.count(": identical (") == 3, replayed.stdout
