"""``_atomic.published_under``: every file written under a state dir is handed to its
publisher before it lands, and does not land when publishing fails (the PostgreSQL
backend's write-through: the database first, then the working copy)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from orchestrator.domain.lifecycle import RunState
from orchestrator.storage._atomic import atomic_write, published_under


class Refused(Exception):
    pass


def test_a_write_under_the_root_is_published_before_it_lands(tmp_path: Path) -> None:
    root = tmp_path / "state"
    seen: list[tuple[Path, bytes, bool]] = []

    def publish(path: Path, data: bytes) -> bool:
        seen.append((path, data, path.exists()))
        return True

    with published_under(root, publish):
        atomic_write(root / "runs" / "a.json", b"one")
        atomic_write(tmp_path / "elsewhere.json", b"two")  # not under the root
        atomic_write(root / "runs" / "b.json", b"three", mirrored=False)  # brought down
    atomic_write(root / "runs" / "c.json", b"after")  # the block is over
    assert seen == [(root / "runs" / "a.json", b"one", False)]
    assert (root / "runs" / "a.json").read_bytes() == b"one"
    assert (root / "runs" / "b.json").read_bytes() == b"three"


def test_a_refused_publish_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    root = tmp_path / "state"
    target = root / "runs" / "a.json"
    atomic_write(target, b"old")

    def publish(path: Path, data: bytes) -> bool:
        raise Refused(path.name)

    with published_under(root, publish), pytest.raises(Refused):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_every_thread_publishes_not_only_the_one_that_registered(tmp_path: Path) -> None:
    root = tmp_path / "state"
    seen: list[str] = []

    def publish(path: Path, data: bytes) -> bool:
        seen.append(path.name)
        return False

    with published_under(root, publish):
        workers = [
            threading.Thread(target=atomic_write, args=(root / f"{n}.json", b"x")) for n in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert sorted(seen) == ["0.json", "1.json", "2.json", "3.json"]


def test_one_publisher_per_root(tmp_path: Path) -> None:
    with (
        published_under(tmp_path, lambda path, data: False),
        pytest.raises(RuntimeError, match="already published"),
        published_under(tmp_path / ".", lambda path, data: False),
    ):
        pass


def test_a_removed_file_is_forgotten_where_it_is_published_first(tmp_path: Path) -> None:
    from orchestrator.storage._atomic import remove_file

    root = tmp_path / "state"
    target = root / "runs" / "a.json"
    atomic_write(target, b"x")
    forgotten: list[tuple[Path, bool]] = []
    with published_under(root, lambda path, data: False, lambda path: forgotten.append(
        (path, path.exists())
    )):  # fmt: skip
        remove_file(target)
        remove_file(target)  # gone already: fine, and still forgotten (it may be elsewhere)
    assert forgotten == [(target, True), (target, False)]
    assert not target.exists()
    remove_file(target)  # no publisher: just gone


def test_a_file_its_publisher_kept_is_not_fsynced_here_and_every_other_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database's commit is a published file's durability; the local file is a
    working copy. A file the publisher did not keep (a key, a lock, a cache) and every
    write with no publisher are flushed, file and directory, before the write returns."""
    import os

    root = tmp_path / "state"
    flushed: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        flushed.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with published_under(root, lambda path, data: path.parent.name == "runs"):
        atomic_write(root / "runs" / "a.json", b"kept")
        assert flushed == []
        atomic_write(root / "keys" / "k", b"not kept")
        assert len(flushed) == 2  # the file, then its directory
        atomic_write(root / "runs" / "b.json", b"brought", mirrored=False)
        assert len(flushed) == 4
    atomic_write(root / "runs" / "c.json", b"no publisher")
    assert len(flushed) == 6
    assert (root / "runs" / "a.json").read_bytes() == b"kept"


def test_a_save_of_this_machine_s_process_group_is_kept_here_alone(tmp_path: Path) -> None:
    """A stage's process group is a pid of this machine: the record naming it is written
    here and not published, so no other machine reads it and kills what it names."""
    from orchestrator.storage.crash_points import CrashPoint
    from orchestrator.storage.runs import RunStore

    from support.notify_fixtures import run_record

    root = tmp_path / "state"
    record = run_record(state=RunState.PENDING)
    store = RunStore(root)
    seen: list[str] = []

    def publish(path: Path, data: bytes) -> bool:
        seen.append(json.loads(data)["state"])
        return True

    with published_under(root, publish):
        store.save(record, CrashPoint.ATTEMPT_STARTED)
        grouped = record.model_copy(update={"state": RunState.RUNNING})
        store.save(grouped, CrashPoint.ATTEMPT_GROUP)
        assert store.load(record.run_id) == grouped  # written here all the same
        store.save(grouped, CrashPoint.ATTEMPT_FINISHED)
    assert seen == [record.state.value, "running"]
