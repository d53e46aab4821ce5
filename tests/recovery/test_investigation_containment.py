"""The investigation's read-only tools read the clone and nothing else. The clone is
untrusted: a symbolic link it holds (a checkout makes one for every committed link) is a
door out of it, to ``/etc`` or to ``../../secret``. A canary outside the clone must never
reach a tool's result, whichever tool and whichever link."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from orchestrator.app.investigation_tools import clone_tools, own_git_dir
from orchestrator.execution.process import CapturedHead, HeadRequest

pytestmark = pytest.mark.timeout(30)

CANARY = "canary-outside-the-clone-5e1f"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone holding links out of it, beside a secret it must not reveal."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text(f"token = {CANARY}\n")
    clone = tmp_path / "work" / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "src").mkdir()
    (clone / "src" / "app.py").write_text("print('inside')\n")
    (clone / "docs").symlink_to(secret)  # like docs -> /etc
    (clone / "x").symlink_to(Path("..") / ".." / "secret" / "key.txt")  # x -> ../../secret
    (clone / "src" / "deep").symlink_to(secret / "key.txt")
    return clone


@pytest.mark.parametrize("path", ["docs/key.txt", "x", "src/deep", str(Path("/etc/hostname"))])
def test_read_file_refuses_a_path_that_leads_out(clone: Path, path: str) -> None:
    with pytest.raises(ValueError, match="is not a file of the clone"):
        clone_tools(clone, {})["read_file"]({"path": path})


def test_read_file_reads_the_clones_own_files(clone: Path) -> None:
    assert clone_tools(clone, {})["read_file"]({"path": "src/app.py"}) == "print('inside')\n"


def test_grep_follows_no_link(clone: Path) -> None:
    grep = clone_tools(clone, {})["grep"]
    assert grep({"text": CANARY}) == "no matches"
    assert grep({"text": "token"}) == "no matches"
    assert grep({"text": "inside"}) == "src/app.py:1: print('inside')"


def test_a_fifo_in_the_clone_is_no_file_to_read(clone: Path) -> None:
    """A stage can leave one behind; opening it to read would wait for a writer."""
    os.mkfifo(clone / "src" / "pipe")
    tools = clone_tools(clone, {})
    assert tools["read_file"]({"path": "src/pipe"}) == "no such file: src/pipe"
    assert tools["grep"]({"text": "inside"}) == "src/app.py:1: print('inside')"


class Recording:
    """An executor that records what it was asked to run."""

    def __init__(self) -> None:
        self.calls: list[Mapping[str, str]] = []

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        self.calls.append(request.env)
        return CapturedHead(b"abc123 a commit\n", False, 0)


def test_git_log_reads_the_clones_own_repository_and_no_other(clone: Path) -> None:
    executor = Recording()
    git_log = clone_tools(clone, {"GIT_DIR": "/elsewhere"}, executor)["git_log"]  # type: ignore[arg-type]
    assert git_log({"n": 3}) == "abc123 a commit\n"
    assert executor.calls[-1]["GIT_DIR"] == str(clone.resolve() / ".git")


@pytest.mark.parametrize("door", ["linked", "gitfile", "commondir", "alternates"])
def test_git_log_refuses_a_git_dir_that_leads_elsewhere(
    clone: Path, tmp_path: Path, door: str
) -> None:
    other = tmp_path / "other-repo" / ".git"
    (other / "objects").mkdir(parents=True)
    git_dir = clone / ".git"
    if door == "linked":
        git_dir.rmdir()
        git_dir.symlink_to(other)
    elif door == "gitfile":
        git_dir.rmdir()
        git_dir.write_text(f"gitdir: {other}\n")
    elif door == "commondir":
        (git_dir / "commondir").write_text(f"{other}\n")
    else:
        (git_dir / "objects" / "info").mkdir(parents=True)
        (git_dir / "objects" / "info" / "alternates").write_text(f"{other / 'objects'}\n")
    executor = Recording()
    git_log = clone_tools(clone, {}, executor)["git_log"]  # type: ignore[arg-type]
    assert own_git_dir(clone) is None
    assert "not a repository of its own" in git_log({"n": 3})
    assert executor.calls == []
