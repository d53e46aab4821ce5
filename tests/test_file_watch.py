"""tests/support/file_watch.py: a wait on another process's file wakes on the write itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import file_watch
from support.file_watch import wait_for


def test_a_write_in_the_folder_wakes_the_wait_not_the_recheck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The re-check would come only after the deadline: the write alone can end the wait.
    monkeypatch.setattr(file_watch, "RECHECK_S", 600.0)
    target = tmp_path / "worker.log"
    writers: list[subprocess.Popen[bytes]] = []

    def written() -> bool:
        if not writers:  # the first look starts the writer: it writes after the wait began
            script = f"open({str(target)!r}, 'a').write('ready.\\n')"
            writers.append(subprocess.Popen([sys.executable, "-c", script]))
        return target.exists() and "ready." in target.read_text()

    wait_for(written, tmp_path, "the log line", deadline_s=60.0)
    assert writers[0].wait(timeout=60) == 0


def test_a_wait_past_its_deadline_fails_naming_what_it_waited_for(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"the log line: not after 0\.2 s\nlog so far"):
        wait_for(lambda: False, tmp_path, "the log line", deadline_s=0.2,
                 explain=lambda: "log so far")  # fmt: skip


def test_a_wait_whose_writer_is_gone_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the log line: it can no longer happen"):
        wait_for(lambda: False, tmp_path, "the log line", deadline_s=600.0,
                 still_possible=lambda: False)  # fmt: skip


def test_a_folder_not_made_yet_is_watched_through_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_watch, "RECHECK_S", 600.0)
    runs = tmp_path / "state" / "runs"
    looks: list[int] = []

    def made() -> bool:
        looks.append(1)
        if len(looks) == 1:
            (tmp_path / "state").mkdir()  # after the watch began, on tmp_path
            return False  # only the watch's wake-up brings the second look
        return True

    wait_for(made, runs, "the state folder", deadline_s=60.0)
    assert len(looks) == 2
