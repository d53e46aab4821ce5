"""The quick tier runs every test file but the end-to-end ones: a file whose tests are all
marked ``slow`` keeps one, marked ``quick`` (see tests/support/suite_clock.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.procfs import is_dead
from support.suite_clock import QUICK_TIER, files_collected, files_without_a_quick_test, per_core

HERE = Path(__file__).resolve().parent


def test_every_test_file_has_a_test_in_the_quick_tier(request: pytest.FixtureRequest) -> None:
    every_file = {str(p.relative_to(HERE.parent)) for p in HERE.rglob("test_*.py")}
    if not every_file <= files_collected(request.config):
        pytest.skip("only a run that collects the whole suite can tell")
    assert files_without_a_quick_test(request.config) == []


def test_the_quick_tier_is_what_dev_sh_selects() -> None:
    script = (HERE.parent / "scripts" / "dev.sh").read_text()
    assert f'-m "{QUICK_TIER}"' in script


@pytest.mark.parametrize(
    ("workers", "busy", "cores", "expected"),
    [
        (0, 0, 2, 1.0),  # one process on two cores: a core of its own
        (2, 0, 2, 1.0),
        (4, 0, 2, 2.0),  # CI: four workers share two cores
        (4, 2, 2, 3.0),  # test-under-load's two busy processes beside them
        (0, 2, 2, 1.5),
        (4, 0, 8, 1.0),
    ],
)
def test_the_limit_grows_with_the_runnable_processes_per_core(
    workers: int, busy: int, cores: int, expected: float
) -> None:
    assert per_core(workers, busy, cores) == expected


# `test-under-load` on a project of one test file: its own dev.sh, the suite's venv.
TINY_TESTS = {
    "passes": "def test_one():\n    pass\n",
    "fails": "def test_one():\n    assert False, 'on purpose'\n",
}


def _busy_loop_alive(pid: int) -> bool:
    if is_dead(pid):
        return False
    try:  # the pid may since be another process's
        return b"while True: pass" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("outcome", ["passes", "fails"])
def test_test_under_load_runs_the_suite_beside_busy_loops_and_stops_them(
    tmp_path: Path, outcome: str
) -> None:
    """It ends (an earlier version waited for its own busy loops forever, where
    PYTHONDONTWRITEBYTECODE is set, as on CI's machines), says how the runs went, exits
    as they did, stops at the first failing run, and leaves no busy loop behind."""
    venv = Path(sys.prefix)
    if not (venv / ".orchestrator-installed").is_file():
        reason = f"the suite's venv ({venv}) was not made by scripts/dev.sh setup"
        print(f"test-under-load test skipped: {reason}")
        pytest.skip(reason)
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(HERE.parent / "scripts" / "dev.sh", root / "scripts" / "dev.sh")
    (root / ".venv").symlink_to(venv)  # no pyproject.toml here: setup installs nothing
    (root / "orchestrator").mkdir()
    (root / "tests").mkdir()
    (root / "tests" / "test_one.py").write_text(TINY_TESTS[outcome])
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # In a process group of its own but not a session: a new session would be a scheduler
    # autogroup of its own, whose busy loops would then get half of the machine against
    # the rest of the suite's workers together. Not niced: at a low priority under the
    # suite's load it waited 15 s for 2 s of CPU, a clock the 90 s bound could trip on.
    script = ["bash", "scripts/dev.sh", "test-under-load", "2", "-n", "0", "-p", "no:cacheprovider"]
    child = subprocess.Popen(
        script, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, process_group=0,
    )  # fmt: skip
    try:
        output, _ = child.communicate(timeout=90)
    finally:
        if child.poll() is None:  # it hangs (the timeout fails the test): end its busy loops
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    busy = re.search(r"pids (\d+) (\d+)", output)
    assert busy is not None, output
    assert not [pid for pid in map(int, busy.groups()) if _busy_loop_alive(pid)], output
    if outcome == "passes":
        assert child.returncode == 0, output
        assert "=== loaded run 2 of 2: exit 0" in output
        assert "=== 2 loaded runs in a row passed" in output
    else:
        assert child.returncode == 1, output
        assert "=== loaded run 1 of 2: exit 1" in output
        assert "loaded run 2" not in output
