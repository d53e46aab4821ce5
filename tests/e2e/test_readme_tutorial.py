"""The README's first-ticket tutorial, step by step as written, with Claude Code and GitHub
played by fakes: ``init``; the README's TOML put into the starter config as it says
(engine added, ``implement`` and ``open-pr`` replaced); the README's ticket; ``doctor``;
``DRY_RUN=false orchestrator run``; then the reading commands. The fake ``claude`` speaks
the real CLI's stream-json (``tests/fakes/claude``); the fake GitHub is the loopback one.
What cannot be as written — the repository URL, where GitHub is — is pointed at the fakes
through the documented ``ORCHESTRATOR_GITHUB_*`` variables."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import git
import pytest
import tomli_w

from conftest import ROOT
from support.github_fake import TOKEN, serve_github
from support.harness import FAKES, make_origin

README = ROOT / "README.md"
ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"
REPO = "you/cards"


def tutorial() -> str:
    text = README.read_text()
    start = text.index("## A first real ticket")
    return text[start : text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", tutorial(), re.M | re.S)


def commands(block: str) -> list[list[str]]:
    """The block's command lines, without comments and the leading environment."""
    found = []
    for text in block.splitlines():
        line = text.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            found.append(line.split())
    return found


def with_readme_toml(config: Path) -> None:
    """What step 2 says: add the engine, replace `implement` and `open-pr`."""
    [snippet] = blocks("toml")
    given = tomllib.loads(snippet)
    data = tomllib.loads(config.read_text())
    data.setdefault("engines", {}).update(given["engines"])
    replacing = {stage["name"]: stage for stage in given["stages"]}
    assert set(replacing) == {"implement", "open-pr"}
    data["stages"] = [replacing.get(stage["name"], stage) for stage in data["stages"]]
    config.write_text(tomli_w.dumps(data))


OVERRIDES = (
    "ORCHESTRATOR_GITHUB_API_URL",
    "ORCHESTRATOR_GITHUB_REPO",
    "ORCHESTRATOR_GITHUB_PUSH_URL",
)


def aimed(config: Path, stage_name: str, names: tuple[str, ...]) -> None:
    """``names`` added to the ``pass_env`` of stage ``stage_name``."""
    data = tomllib.loads(config.read_text())
    for stage in data["stages"]:
        if stage["name"] == stage_name:
            stage["pass_env"] = [*stage.get("pass_env", []), *names]
    config.write_text(tomli_w.dumps(data))


def test_the_tutorials_config_and_ticket_load(tmp_path: Path) -> None:
    """The quick half: the README's TOML, put into the starter config as step 2 says,
    loads; its ticket parses; its engine is the one `implement` runs."""
    from orchestrator import starter
    from orchestrator.domain.config import load_config
    from orchestrator.domain.tickets import parse_ticket

    config = tmp_path / "config.toml"
    config.write_text(starter.config_text())
    with_readme_toml(config)
    stages = {stage.name: stage for stage in load_config(config).config.stages}
    assert stages["implement"].engine == "claude"
    assert "orchestrator.stages.open_pr_github" in (stages["open-pr"].command or ())
    [ticket] = blocks("markdown")
    parsed = parse_ticket(ticket, tmp_path / "tickets" / "FIX-1.md")
    assert (parsed.id, parsed.fields.kind) == ("FIX-1", "bug-fix")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_first_ticket_tutorial_works_as_written(tmp_path: Path) -> None:
    if not ORCHESTRATOR.is_file():
        pytest.skip(f"no installed orchestrator command at {ORCHESTRATOR}")
    origin = make_origin(tmp_path, {
        "cards.py": "def deal(n):\n    return list(range(n - 1))\n",
        "tests/__init__.py": "",
        "tests/test_cards.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
                               "    def test_ok(self):\n        self.assertTrue(True)\n",
    })  # fmt: skip
    home = tmp_path / "home"
    project = home / "tickets"
    project.mkdir(parents=True)
    step1, step3, step5, step6 = blocks("bash")
    with serve_github() as github:
        github.add_issue(REPO, 1, "unrelated", "", ())
        env = {
            "PATH": f"{FAKES}:{ORCHESTRATOR.parent}:/usr/bin:/bin", "HOME": str(home),
            "FAKE_ENGINE_MODE": "success", "GITHUB_TOKEN": TOKEN,
            "ANTHROPIC_API_KEY": "sk-ant-api03-" + "tutorial0" * 8,
            "ORCHESTRATOR_GITHUB_API_URL": github.url, "ORCHESTRATOR_GITHUB_REPO": REPO,
            "ORCHESTRATOR_GITHUB_PUSH_URL": str(origin), "ORCHESTRATOR_ALLOW_MODEL_REQUESTS": "0",
        }  # fmt: skip

        def sh(argv: list[str], *, extra: dict[str, str] | None = None) -> str:
            done = subprocess.run(argv, cwd=project, env={**env, **(extra or {})},
                                  capture_output=True, text=True, timeout=180)  # fmt: skip
            assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
            return done.stdout + done.stderr

        # 1. Start a project directory (the block's `mkdir` and `cd` are ours already).
        assert commands(step1)[-1] == ["orchestrator", "init"]
        sh(commands(step1)[-1])
        # 2. The README's TOML into the starter config.
        with_readme_toml(project / "config.toml")
        # Not the README's: this open-pr talks to the fake GitHub, through the variables
        # that point it there, named as any variable a stage needs is (issue 40).
        aimed(project / "config.toml", "open-pr", OVERRIDES)
        # 3. The keys (the model is never asked: this run is green, and the suite forbids it).
        assert [c[1].split("=")[0] for c in commands(step3)] == [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
        ]
        # 4. The README's ticket, its repository where the fake's origin is.
        [ticket] = blocks("markdown")
        (project / "tickets" / "FIX-1.md").write_text(
            ticket.replace("https://github.com/you/cards.git", str(origin))
        )
        # 5. Check, then run, watched.
        doctor, run = commands(step5)
        assert doctor == ["orchestrator", "doctor"] and run[0] == "DRY_RUN=false"
        said = sh(doctor, extra={"DRY_RUN": "false"})
        assert "✗" not in said, said
        said = sh(run[1:], extra={"DRY_RUN": "false"})
        assert "completed" in said, said
        [pull] = github.pulls[REPO]
        assert pull["head"]["ref"] == "orch/FIX-1" and pull["title"] == (
            "deal() hands out one card too few"
        )
        pushed = git.Repo(origin).commit("orch/FIX-1")
        assert "CHANGED_BY_CLAUDE.txt" in pushed.tree  # the (fake) Claude Code's work
        # 6. Read what happened.
        for argv in commands(step6):
            sh(argv)
        assert (project / "report.html").is_file()
        assert TOKEN not in said
