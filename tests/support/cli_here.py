"""The real CLI's ``main`` run in the calling test's process, its result shaped as a
finished process's (``subprocess.CompletedProcess``: exit code, stdout, stderr).

For a test of what a command says and does, not of how the program starts: each call
saves an interpreter start and the orchestrator's imports, most of a second of CPU
(``python -m orchestrator run`` imports 0.7 s of modules before it reads its config).
The environment is exactly ``env`` during the call and the working directory ``cwd``
(else the test's own, as a child started without one gets); both are given back after
it. ``entry``'s own step (the key shield on this process's /proc) is left out, as for
every test that calls ``main``; what the command held (its ``pass_env`` values) is let
go after the test (tests/conftest.py). A process of its own is still what a test needs
when it kills, signals or times the command, or reads what it leaves at exit.
"""

from __future__ import annotations

import io
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest


def cli_here(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``orchestrator ARGV`` in this process."""
    from orchestrator.cli.main import main as cli_main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        if cwd is not None:
            mp.chdir(cwd)
        for name in set(os.environ) - set(env):
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setattr(tempfile, "tempdir", None)  # found from this TMPDIR, then given back
        with redirect_stdout(out), redirect_stderr(err):
            code = cli_main(list(argv))
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())
