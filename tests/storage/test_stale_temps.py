"""Temp files a killed atomic write leaves behind are removed — and one a live process is
writing at that moment is not. Crash points are named from a closed set."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.storage._atomic import (
    STALE_AFTER_S,
    atomic_write,
    sweep_stale_temps,
    writer_tag,
)
from orchestrator.storage.crash_points import CRASH_ENV, CrashPoint, armed
from orchestrator.storage.files import FileStorage

from conftest import subprocess_env


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process that is alive for the length of the test (a concurrent writer)."""
    child = subprocess.Popen(["sleep", "60"])
    yield child.pid
    child.kill()
    child.wait()


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def tag(pid: int) -> str:
    """The writer part of a temp file's name, for ``pid`` on this machine."""
    return writer_tag().rsplit("-", 1)[0] + f"-{pid}"


def test_a_temp_file_names_its_writer(tmp_path: Path) -> None:
    seen: list[str] = []
    real = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append(Path(src).name)
        real(src, dst)

    os.replace = spy  # type: ignore[assignment]
    try:
        atomic_write(tmp_path / "run.json", b"{}")
    finally:
        os.replace = real
    [name] = seen
    assert name.startswith(f".run.json.{writer_tag()}.") and name.endswith(".tmp")
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_the_sweep_removes_a_dead_writers_temp_and_keeps_a_live_ones(
    tmp_path: Path, live_pid: int
) -> None:
    dead = tmp_path / f".T-1.json.{tag(dead_pid())}.abcd1234.tmp"
    live = tmp_path / f".T-1.json.{tag(live_pid)}.abcd1234.tmp"
    mine = tmp_path / f".T-1.json.{tag(os.getpid())}.abcd1234.tmp"  # a dead process's, pid reused
    old_format = tmp_path / ".T-1.json.k2j4h6g8.tmp"  # no pid: kept until it is old
    # Another machine sharing the state dir: its pids mean nothing here.
    elsewhere = tmp_path / f".T-1.json.0badf00d-{dead_pid()}.abcd1234.tmp"
    others = [tmp_path / ".notes.tmp", tmp_path / "T-1.json", tmp_path / "a.json.1.abcd1234.tmp"]
    for path in [dead, live, mine, old_format, elsewhere, *others]:
        path.write_text("x")
    (tmp_path / "clone").mkdir()
    below = tmp_path / "clone" / f".x.{tag(dead_pid())}.abcd1234.tmp"
    below.write_text("not ours")

    removed = sweep_stale_temps([tmp_path])
    assert sorted(removed) == sorted([dead, mine])
    assert live.exists() and old_format.exists() and elsewhere.exists() and below.exists()
    assert all(p.exists() for p in others)

    # An hour on, nobody is still writing anything: the old-format one goes, and so does
    # one whose pid now names some other live process.
    later = time.time() + STALE_AFTER_S + 1
    assert sorted(sweep_stale_temps([tmp_path], now=later)) == sorted([live, old_format, elsewhere])


def test_in_a_persons_directory_only_temps_of_our_targets_are_swept(tmp_path: Path) -> None:
    ours = tmp_path / f".T-1.1.md.{tag(dead_pid())}.abcd1234.tmp"
    theirs = tmp_path / f".draft.txt.{tag(dead_pid())}.abcd1234.tmp"
    for path in (ours, theirs):
        path.write_text("x")
    assert sweep_stale_temps([tmp_path], target_suffix=".md") == [ours]
    assert theirs.exists()


def test_opening_a_state_dir_sweeps_where_atomic_writes_go(tmp_path: Path) -> None:
    state = tmp_path / "state"
    pid = tag(dead_pid())
    places = [
        state / f".ledger.head.{pid}.abcd1234.tmp",
        state / "runs" / f".T-1-20261130T000000Z-abcd.json.{pid}.abcd1234.tmp",
        state
        / "runs"
        / "T-1-20261130T000000Z-abcd.replies"
        / f".{'a' * 64}.txt.{pid}.abcd1234.tmp",
        state / "runs" / "T-1-20261130T000000Z-abcd" / f".pull-request.json.{pid}.abcd1234.tmp",
        state / "tickets" / f".T-1.json.{pid}.abcd1234.tmp",
        state / "batches" / "b1" / f".budget.json.{pid}.abcd1234.tmp",
    ]
    for path in places:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert sorted(FileStorage(state).sweep_stale_temps()) == sorted(places)


def test_a_temp_file_left_by_a_kill_mid_write_is_swept_by_the_next_opener(
    tmp_path: Path,
) -> None:
    """A real SIGKILL between the temp file and its rename, then a real ``run`` opener."""
    target = tmp_path / "state" / "runs" / "x.json"
    code = (
        "from pathlib import Path; from orchestrator.storage._atomic import atomic_write; "
        f"atomic_write(Path({str(target)!r}), b'{{}}')"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(**{CRASH_ENV: "temp-file"}), timeout=60
    )
    assert killed.returncode == -9
    [left] = target.parent.iterdir()
    assert left.name.startswith(".x.json.") and not target.exists()
    assert FileStorage(tmp_path / "state").sweep_stale_temps() == [left]


def test_crash_points_are_a_closed_set() -> None:
    assert armed({}) is None
    assert armed({CRASH_ENV: "verdict"}) == ("verdict", 1)
    assert armed({CRASH_ENV: "sub-ticket:2"}) == ("sub-ticket", 2)
    with pytest.raises(ValueError, match="no crash point 'verdic'"):
        armed({CRASH_ENV: "verdic"})
    with pytest.raises(ValueError, match="'x' is not a number"):
        armed({CRASH_ENV: "verdict:x"})
    assert len({p.value for p in CrashPoint}) == len(CrashPoint)


def test_a_stage_never_inherits_the_armed_crash_point(tmp_path: Path) -> None:
    """Stage programs use the same atomic writes: armed too, one would die in the
    orchestrator's place."""
    from orchestrator.execution.stage_env import StageContext, stage_environ

    ctx = StageContext(
        ticket_file=tmp_path / "T-1.md", ticket_id="T-1", ticket_kind="feature",
        repository="../origin.git", base_branch="main", run_id="r1", run_dir=tmp_path,
        clone_dir=tmp_path / "clone", state_dir=tmp_path, stage="build", engine="",
        model="", attempt=1,
    )  # fmt: skip
    env = stage_environ({"PATH": "/usr/bin", CRASH_ENV: "temp-file"}, ctx)
    assert CRASH_ENV not in env and env["PATH"].endswith("/usr/bin")
