"""One ticket through the real CLI with a released agent as its engine: what every
contract test does the same way, whatever the agent.

    clone → implement (the agent, sandboxed, its egress only the model server) → review

The project is one file with a misspelt greeting (``BROKEN``); the review's check passes
once the agent fixed it (``CHECK``). Recovery is off: each test sees what the agent's
one attempt came to, as the run record keeps it and ``orchestrator show`` says it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model_server import ModelServer
from conftest import orchestrator_cmd, subprocess_env, write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.sandbox_required import require_sandbox

BROKEN = 'GREETING = "helo"\n'
# The review's check, run by the orchestrator (not by the agent).
CHECK = "import greeting; assert greeting.GREETING == 'hello', greeting.GREETING"


@dataclass
class Run:
    """What one run came to: its record, the implement attempt, the CLI's output, and
    the model server with what it was asked (``script``: the dialect's own router)."""

    record: dict[str, Any]
    attempt: dict[str, Any]
    output: str
    server: ModelServer
    script: Any
    config: Path
    env: dict[str, str]

    def show(self) -> str:
        return subprocess.run(
            orchestrator_cmd("--config", str(self.config), "show", self.record["run_id"]),
            env=self.env, capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip

    def log(self) -> str:
        return Path(self.attempt["log_path"]).read_text()


def project(tmp_path: Path, files: dict[str, str] | None = None) -> None:
    """The project the ticket is on: ``work`` with its first commit, cloned bare as
    ``origin.git`` (what the clone stage takes)."""
    require_sandbox()
    work = init_repo(tmp_path / "work")
    commit_files(work, {"greeting.py": BROKEN, **(files or {})}, "initial")
    bare_clone(tmp_path / "work", tmp_path / "origin.git")


def pipeline(engine_table: str, engine: str, *, timeout_s: int, readable: list[str],
             head: str = "") -> str:  # fmt: skip
    """The config: ``head`` (prices, say), the clone stage, ``engine_table`` (the agent's
    ``[engines.NAME]`` table), the implement stage with the agent, stopped at
    ``timeout_s``, its install made ``readable`` (the agents' cache, which the sandbox
    hides), and the review's check."""
    shown = ", ".join(json.dumps(place) for place in readable)
    return (
        'state_dir = "state"\n[recovery]\nenabled = false\n' + head
        + '[[stages]]\nname = "clone"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\ncwd = "run"\n'
        + engine_table
        + f'[[stages]]\nname = "implement"\nengine = "{engine}"\ntimeout_s = {timeout_s}\n'
        f"kill_after_s = 2\nreadable = [{shown}]\n"
        '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "greeting"\n'
        f'command = ["{{python}}", "-c", "{CHECK}"]\non_red_base = "ignore"\n'
    )  # fmt: skip


def run_ticket(
    tmp_path: Path,
    config_text: str,
    server: ModelServer,
    script: Any,
    *,
    program: Path,
    deadline_s: float,
    **env: str,
) -> Run:
    """Write the config, run the ticket through ``orchestrator run`` with the agent's
    ``program`` on PATH and ``env`` (its key, its base URL) while ``server`` answers,
    and read back the one run it made."""
    config = tmp_path / "config.toml"
    config.write_text(config_text)
    ticket = write_ticket(tmp_path / "t", kind="feature", body="Fix the greeting's spelling.")
    environ = subprocess_env(
        HOME=str(tmp_path), DRY_RUN="false",
        PATH=f"{program.parent}:{subprocess_env()['PATH']}", **env,
    )  # fmt: skip
    with server:
        done = subprocess.run(
            orchestrator_cmd("--config", str(config), "run", str(ticket)),
            env=environ, capture_output=True, text=True, timeout=deadline_s, check=False,
        )  # fmt: skip
    output = done.stdout + done.stderr
    records = list((tmp_path / "state" / "runs").glob("T-1-*.json"))
    assert len(records) == 1, output
    record = json.loads(records[0].read_text())
    (attempt,) = [a for a in record["attempts"] if a["stage"] == "implement"]
    return Run(record, attempt, output, server, script, config, environ)
