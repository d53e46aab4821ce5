"""``orchestrator init`` prepares an unattended batch: the state dir exists before the first
batch, and ``orchestrator.env`` (mode 0600, never overwritten) gives cron and systemd the
``PATH`` to this orchestrator, read the same by ``/bin/sh`` and by systemd's rules."""

from __future__ import annotations

import io
import stat
import subprocess
from pathlib import Path

import pytest

from orchestrator.cli.commands.init import ENV_FILE, env_file_text, init, program_dir
from orchestrator.domain.errors import UsageError


@pytest.mark.parametrize(
    ("argv0", "executable", "expected"),
    [
        ("/home/u/.local/bin/orchestrator", "/home/u/.local/pipx/venvs/t/bin/python",
         "/home/u/.local/bin"),  # pipx: the link's directory, not where it points
        ("/srv/o/.venv/lib/python3.11/site-packages/orchestrator/__main__.py",
         "/srv/o/.venv/bin/python3", "/srv/o/.venv/bin"),  # python -m orchestrator
        ("orchestrator", "/opt/venv/bin/python", "/opt/venv/bin"),  # found on PATH: no dir
    ],
)  # fmt: skip
def test_where_the_orchestrator_is(argv0: str, executable: str, expected: str) -> None:
    assert program_dir(argv0, executable) == Path(expected)


def test_init_makes_the_state_dir_and_a_private_env_file(tmp_path: Path) -> None:
    out = io.StringIO()

    assert init(tmp_path, out, force=False) == 0

    assert (tmp_path / ".state").is_dir()
    env_file = tmp_path / ENV_FILE
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert f"made {tmp_path / '.state'}/\n" in out.getvalue()
    env_file.write_text(env_file.read_text() + "ANTHROPIC_API_KEY=sk-ant-mine\n")
    (tmp_path / "config.toml").unlink()

    assert init(tmp_path, io.StringIO(), force=False) == 0  # the keys are never overwritten

    assert env_file.read_text().endswith("ANTHROPIC_API_KEY=sk-ant-mine\n")


def test_the_env_file_reads_the_same_in_sh_and_by_systemds_rules(tmp_path: Path) -> None:
    text = env_file_text(Path("/home/u/.local/bin"))
    (tmp_path / ENV_FILE).write_text(text + "DRY_RUN=false\n")
    shell = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c",
         f"set -a; . ./{ENV_FILE}; set +a; env"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    from_sh = dict(
        line.split("=", 1) for line in shell.stdout.splitlines() if not line.startswith(("_=", "PWD=", "SHLVL="))
    )  # fmt: skip
    # systemd.exec(5): KEY=VALUE lines; lines starting with # or ; are comments.
    from_systemd = dict(
        line.split("=", 1)
        for line in (tmp_path / ENV_FILE).read_text().splitlines()
        if line and not line.startswith(("#", ";"))
    )
    assert (
        from_sh
        == from_systemd
        == {
            "PATH": "/home/u/.local/bin:/usr/local/bin:/usr/bin:/bin",
            "DRY_RUN": "false",
        }
    )


def test_a_state_path_that_is_a_file_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    (tmp_path / ".state").write_text("not a directory\n")

    with pytest.raises(UsageError, match=r"\.state is not a directory"):
        init(tmp_path, io.StringIO(), force=False)

    assert not (tmp_path / "config.toml").exists() and not (tmp_path / ENV_FILE).exists()
