"""The README's unattended recipes work exactly as written on a fresh setup: ``init`` in
an empty directory, a ticket, then the README's cron line run as cron runs it — ``/bin/sh``
with nothing but ``PATH=/usr/bin:/bin``, ``HOME``, ``SHELL`` and ``LOGNAME`` — finds the
orchestrator through ``orchestrator.env``, takes ``DRY_RUN`` from it, and leaves its
progress in the log it names; the systemd units say the same."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import git
import pytest

from conftest import ROOT
from support.gitrepo import commit_files, init_repo

README = ROOT / "README.md"
ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"


def fenced(language: str) -> list[str]:
    """The README's code blocks in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", README.read_text(), re.M | re.S)


def cron_command() -> str:
    [block] = fenced("cron")
    [line] = [line for line in block.splitlines() if line and not line.startswith("#")]
    return line.split(maxsplit=5)[5]  # after the five schedule fields: what cron's sh runs


def a_ticket(tickets: Path, tmp_path: Path) -> None:
    """A feature ticket for a tiny project, its change as a patch (the default pipeline's
    offline `patch` engine applies it; its own unittest suite reviews it)."""
    work = init_repo(tmp_path / "work")
    test = "import unittest\nfrom cards import deal\n\n\nclass T(unittest.TestCase):\n"
    commit_files(work, {
        "cards.py": "def deal(n):\n    return list(range(n - 1))\n",
        "tests/__init__.py": "",
        "tests/test_cards.py": test + "    def test_deal(self):\n        self.assertTrue(deal(1) is not None)\n",
    }, "start")  # fmt: skip
    git.Repo.clone_from(work.working_dir, tmp_path / "origin.git", bare=True).close()
    work.git.checkout("-b", "fix")
    commit_files(work, {
        "cards.py": "def deal(n):\n    return list(range(n))\n",
        "tests/test_cards.py": test + "    def test_deal(self):\n        self.assertEqual(len(deal(5)), 5)\n",
    }, "Deal n cards")  # fmt: skip
    (tickets / "FIX-1.patch").write_text(work.git.format_patch("--stdout", "main..fix") + "\n")
    (tickets / "FIX-1.md").write_text(
        '+++\nid = "FIX-1"\ntitle = "deal() hands out one card too few"\nkind = "feature"\n'
        f'repository = "{tmp_path / "origin.git"}"\nbase_branch = "main"\n\n'
        '[extras.patch]\nfile = "FIX-1.patch"\n+++\ndeal(5) returns four cards.\n'
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_readme_cron_line_runs_on_a_fresh_init(tmp_path: Path) -> None:
    if not ORCHESTRATOR.is_file():
        pytest.skip(f"no installed orchestrator command at {ORCHESTRATOR}")
    home = tmp_path / "home"
    project = home / "tickets"  # where the README's recipe lives
    project.mkdir(parents=True)
    subprocess.run([str(ORCHESTRATOR), "init"], cwd=project, check=True, capture_output=True,
                   timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(home)})  # fmt: skip
    a_ticket(project / "tickets", tmp_path)
    env_file = project / "orchestrator.env"
    env_file.write_text(env_file.read_text().replace("#DRY_RUN=false", "DRY_RUN=false"))
    cron_env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "SHELL": "/bin/sh", "LOGNAME": "u"}

    done = subprocess.run(["/bin/sh", "-c", cron_command()], env=cron_env, capture_output=True,
                          text=True, timeout=150)  # fmt: skip

    log = (project / ".state" / "batch.log").read_text()
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), log  # all in the log
    log = (project / ".state" / "batch.log").read_text()
    assert re.search(r"^\S+Z\s+FIX-1\s+completed\s", log, re.M), log
    assert "1 ticket(s): 1 completed" in log
    assert git.Repo(tmp_path / "origin.git").git.show("orch/FIX-1:cards.py").endswith("range(n))")

    again = subprocess.run(["/bin/sh", "-c", cron_command()], env=cron_env, capture_output=True,
                           text=True, timeout=150)  # fmt: skip

    assert again.returncode == 0, again
    log = (project / ".state" / "batch.log").read_text()
    assert "already-completed" in log.split("1 ticket(s): 1 completed", 1)[1]  # appended


def test_the_readme_systemd_units_run_the_same_batch() -> None:
    service, timer = fenced("ini")
    assert "EnvironmentFile=%h/tickets/orchestrator.env" in service
    assert "WorkingDirectory=%h/tickets" in service
    [start] = [line for line in service.splitlines() if line.startswith("ExecStart=")]
    batch = cron_command().rsplit("&& ", 1)[1]  # the cron line's command, after its set-up
    assert start == f"ExecStart=/bin/sh -c 'exec {batch}'"
    assert "OnCalendar=*:0/5" in timer and "[Install]" in timer
