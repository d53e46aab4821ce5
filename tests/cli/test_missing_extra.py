"""Without the distributed extra, the commands that need it say how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.main import main

from conftest import orchestrator_cmd, subprocess_env

INSTALL = (
    "pipx install 'ticket-orchestrator[distributed]' "
    "(or pip install 'ticket-orchestrator[distributed]')"
)


@pytest.mark.parametrize(
    ("argv", "what"),
    [(["worker"], "worker"), (["batch", "--backend", "celery"], "batch --backend celery")],
)
@pytest.mark.parametrize("missing", ["celery", "redis"])
def test_a_missing_extra_is_a_usage_error_naming_the_install(
    argv: list[str],
    what: str,
    missing: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # `import celery` now raises ImportError
    assert main(["--config", "/nonexistent/config.toml", *argv]) == 2
    assert capsys.readouterr().err == (
        f"{what} needs the distributed extra ({missing} is not installed): {INSTALL}\n"
    )


def test_in_a_fresh_interpreter_whose_celery_cannot_be_imported(tmp_path: Path) -> None:
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoCelery:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'celery':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, _NoCelery())\n"
    )
    env = subprocess_env()
    env["PYTHONPATH"] = f"{blocker}:{env['PYTHONPATH']}"
    done = subprocess.run(
        orchestrator_cmd("worker"), env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr == f"worker needs the distributed extra (celery is not installed): {INSTALL}\n"
    )
