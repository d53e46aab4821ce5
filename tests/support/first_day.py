"""The guide's first day with issues (docs/guide/sources-and-notifications.md, *A first day
with issues*), read from the page and run as written: each ``bash`` block is one ``sh``
script run in the project directory, with an environment that holds nothing but ``HOME``
and a ``PATH`` of the installed ``orchestrator`` and cron's, so what the commands see is
what ``orchestrator.env`` gives them.
Shared by tests/e2e/test_first_day_github.py and test_first_day_gitlab.py.

Where the guide says "your" something — the forge's host, the repository, the token, the
coding agent — the test puts its own: a loopback forge fake named only by the source's
``api_url``/``base_url`` (a self-hosted forge, no ``ORCHESTRATOR_*`` variable anywhere),
a bare repository on disk as the source's ``repository``, the fake's token, and the fake
Claude Code of tests/fakes on ``PATH`` (the suite never calls a model)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from conftest import ROOT
from support.harness import FAKES

GUIDE = ROOT / "docs" / "guide" / "sources-and-notifications.md"
README = ROOT / "README.md"
ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"
CRON_PATH = "/usr/bin:/bin"
# A key of the right shape for the fake agent; nothing is ever sent with it.
AGENT_KEY = "sk-ant-api03-" + "firstday0" * 8
AUTHOR = ("Issue Bot", "issue-bot@example.org")  # step 2's [git]


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def first_day() -> str:
    return section(GUIDE.read_text(), "## A first day with issues")


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def commands(block: str) -> list[str]:
    """The block's lines without their comments: what a user types."""
    lines = (line.split("  #", 1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def agent_toml() -> dict[str, Any]:
    """The README's step 2 (*A first real ticket*): the coding agent and the `implement`
    stage that uses it, which the guide's step 2 points to."""
    [snippet] = blocks(section(README.read_text(), "## A first real ticket"), "toml")
    return tomllib.loads(snippet)


@dataclass
class Shell:
    """The user's terminal in the project directory."""

    project: Path
    home: Path
    transcript: list[str] = field(default_factory=list)  # everything every command said

    def run(self, script: list[str], *, expect: int | None = 0) -> tuple[int, str]:
        done = subprocess.run(
            ["sh", "-c", "\n".join(["set -e", *script])],
            cwd=self.project,
            env={
                "HOME": str(self.home),
                "PATH": f"{ORCHESTRATOR.parent}:{CRON_PATH}",
                "LANG": "C.UTF-8",
                "ORCHESTRATOR_ALLOW_MODEL_REQUESTS": "0",
            },
            capture_output=True,
            text=True,
            timeout=240,
        )
        said = done.stdout + done.stderr
        self.transcript.append(said)
        if expect is not None:
            assert done.returncode == expect, f"{script}: exit {done.returncode}\n{said}"
        return done.returncode, said


def configure(project: Path, forge_toml: str, source: dict[str, Any]) -> dict[str, Any]:
    """Step 2: the agent for `implement`, the forge's ``[[sources]]`` table (its values
    replaced by ``source``: where the test's forge and repository are), ``[git]`` and the
    `open-pr` stage, put into the starter config as the guide says. Returns the source
    table."""
    given = tomllib.loads(forge_toml)
    agent = agent_toml()
    config = project / "config.toml"
    data = tomllib.loads(config.read_text())
    data.setdefault("engines", {}).update(agent["engines"])
    [implement] = [s for s in agent["stages"] if s["name"] == "implement"]
    [open_pr] = given["stages"]
    replacing = {"implement": implement, "open-pr": open_pr}
    assert {s["name"] for s in data["stages"]} >= set(replacing)
    data["stages"] = [replacing.get(s["name"], s) for s in data["stages"]]
    [table] = given["sources"]
    assert set(source) - {"repository"} <= set(table), (source, table)
    table = {**table, **source}
    data["sources"] = [table]
    # "uncomment `[git]` and name who the commits are by"
    data["git"] = {"author_name": AUTHOR[0], "author_email": AUTHOR[1]}
    config.write_text(tomli_w.dumps(data))
    return table


def fill_env(project: Path, values: dict[str, str]) -> None:
    """Step 3: the token and the agent's key written into ``orchestrator.env``, and the
    agent's program (the fake ``claude``) on its ``PATH``, as an installed one would be."""
    env_file = project / "orchestrator.env"
    lines = env_file.read_text().splitlines()
    lines = [f"PATH={FAKES}:{line[5:]}" if line.startswith("PATH=") else line for line in lines]
    for name, value in values.items():
        # init's file names each variable in a commented line: filled in where it stands.
        assert f"#{name}=" in lines, (name, lines)
        lines[lines.index(f"#{name}=")] = f"{name}={value}"
    env_file.write_text("\n".join(lines) + "\n")


def arm_for_real(project: Path) -> None:
    """Step 6: ``#DRY_RUN=false`` uncommented."""
    env_file = project / "orchestrator.env"
    text = env_file.read_text()
    assert "\n#DRY_RUN=false\n" in text
    env_file.write_text(text.replace("\n#DRY_RUN=false\n", "\nDRY_RUN=false\n"))


def ledger_rows(project: Path) -> list[dict[str, Any]]:
    path = project / ".state" / "ledger.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_record(project: Path, run_id: str) -> dict[str, Any]:
    """The run record as stored: what ``orchestrator show --json RUN`` prints, read
    without starting another process."""
    record: dict[str, Any] = json.loads(
        (project / ".state" / "runs" / f"{run_id}.json").read_text()
    )
    return record
