"""``orchestrator report`` starts like the other read-only commands: asking for its help
loads no validation library and no model SDK, and writing a report loads neither the
model SDK nor the distributed mode's libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, subprocess_env

HEAVY = ("pydantic", "pydantic_core", "anthropic", "celery", "redis", "kombu")


def loaded_after(argv: list[str]) -> tuple[str, set[str]]:
    """What ``main(argv)`` printed, and which of ``HEAVY`` it loaded, in a fresh interpreter."""
    probe = (
        "import contextlib, io, sys\n"
        "from orchestrator.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(out.getvalue())\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=subprocess_env(),
        timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    *printed, modules = proc.stdout.rstrip("\n").splitlines()
    return "\n".join(printed), set(ast.literal_eval(modules))


def test_report_help_loads_no_validation_library_or_sdk() -> None:
    printed, heavy = loaded_after(["report", "--help"])
    assert "--batch ID" in printed and "--since DATE" in printed and "--out PATH" in printed
    assert heavy == set()


def test_a_report_loads_no_sdk_and_no_queue_library(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    (tmp_path / "state").mkdir()
    printed, heavy = loaded_after(
        ["--state-dir", str(tmp_path / "state"), "report", "--out", str(page)]
    )
    assert f"report: 0 run(s) (every run) written to {page}" in printed
    assert heavy <= {"pydantic", "pydantic_core"}
