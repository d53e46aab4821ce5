"""The key shield: the orchestrator's secrets leave its exec-time environment block (what
/proc/PID/environ shows) and the process becomes non-dumpable, while ``os.environ``, which
our code reads, keeps them. Each behaviour is proven in a fresh interpreter (the shield
changes the process that calls it); the end-to-end attack through the CLI is in
tests/cli/test_key_shield_cli.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.domain import keys
from orchestrator.domain.broker_url import BROKER_URL_ENV
from orchestrator.execution import key_shield, stage_env
from orchestrator.execution.key_shield import is_withheld, secret_spans

from conftest import subprocess_env

pytestmark = pytest.mark.timeout(60)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="/proc and prctl are Linux's")


def test_it_withholds_what_a_stage_is_never_given() -> None:
    """The same rule (one definition, domain/keys.py), and a module light enough to load
    before ``--help`` prints: importing the shield loads no pydantic."""
    assert key_shield.SECRET_NAME is keys.SECRET_NAME
    assert key_shield.BROKER_URL_ENV == BROKER_URL_ENV
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, orchestrator.execution.key_shield; "
         "print('pydantic' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "False"
    names = ["ANTHROPIC_API_KEY", "GITHUB_TOKEN", "ORCHESTRATOR_LEDGER_KEY", "db_password",
             "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "PATH", "HOME", BROKER_URL_ENV]  # fmt: skip
    for name in names:
        assert is_withheld(name) is (keys.is_secret_name(name) or name == BROKER_URL_ENV), name
        # Whatever the shield blanks, no stage is given unless its pass_env names it (a
        # stage's environment is an allow-list: it withholds far more than these).
        if is_withheld(name):
            assert name not in stage_env.stage_environ({name: "v"}, _CONTEXT), name


_CONTEXT = stage_env.StageContext(
    ticket_file=Path("/s/runs/r/ticket/T-1.md"), ticket_id="T-1", ticket_kind="bug-fix",
    repository="/r", base_branch="main", run_id="r", run_dir=Path("/s/runs/r"),
    clone_dir=Path("/s/runs/r/clone"), state_dir=Path("/s"), stage="build", engine="",
    model="", attempt=1,
)  # fmt: skip


def test_the_spans_are_the_values_of_secret_names_only() -> None:
    block = b"PATH=/bin\0GITHUB_TOKEN=ghp_1\0EMPTY_KEY=\0HOME=/root\0A_SECRET=x=y\0"
    spans = secret_spans(block)
    assert spans == [("GITHUB_TOKEN", 23, b"ghp_1"), ("A_SECRET", 60, b"x=y")]
    for _, offset, value in spans:
        assert block[offset : offset + len(value)] == value


def fresh(code: str, **env: str) -> str:
    """What ``code`` prints in a new interpreter with ``env`` added to its environment."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=subprocess_env(**env), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


CANARIES = {
    "ANTHROPIC_API_KEY": "sk-ant-canary-a1b2c3",
    "ORCHESTRATOR_LEDGER_KEY": "canary-ledger-d4e5",
    "GITHUB_TOKEN": "ghp_canary_f6a7",
    BROKER_URL_ENV: "redis://:canary-pw-b8c9@127.0.0.1:1/0",
}


@linux_only
def test_the_exec_time_block_loses_the_values_and_os_environ_keeps_them() -> None:
    out = fresh(
        """
        import os
        from orchestrator.execution.key_shield import shield
        blanked = shield()
        print(sorted(blanked))
        print(open(f"/proc/{os.getpid()}/environ", "rb").read())
        print(os.environ["ANTHROPIC_API_KEY"], os.environ["ORCHESTRATOR_BROKER_URL"])
        print(os.environ["PATH"] == os.getenv("PATH"), shield())
        """,
        **CANARIES,
    )
    names, block, kept, last = out.splitlines()
    assert names == str(sorted(CANARIES))
    for name, value in CANARIES.items():
        assert value not in block and f"{name}=\\x00" in block
    assert "PATH=" in block  # everything else is as it was
    assert kept == f"{CANARIES['ANTHROPIC_API_KEY']} {CANARIES[BROKER_URL_ENV]}"
    assert last == "True []"  # a second call finds nothing left to blank


@linux_only
def test_the_process_and_its_forks_are_not_dumpable_and_an_exec_is() -> None:
    """Fork keeps the flag (the fleet worker's pool processes), exec resets it (a stage
    is a program of its own, and the reaper reads its /proc)."""
    out = fresh(
        """
        import ctypes, os, subprocess, sys
        from orchestrator.execution.key_shield import shield
        prctl = ctypes.CDLL(None).prctl
        before = prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
        shield()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(write, str(prctl(3, 0, 0, 0, 0)).encode())
            os._exit(0)
        os.waitpid(child, 0)
        forked = os.read(read, 10).decode()
        execed = subprocess.run(
            [sys.executable, "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        print(before, prctl(3, 0, 0, 0, 0), forked, execed)
        """,
        **CANARIES,
    )
    assert out.split() == ["1", "0", "0", "1"]
