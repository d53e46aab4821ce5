"""``_atomic.published_under``: every file written under a state dir is handed to its
publisher before it lands, and does not land when publishing fails (the PostgreSQL
backend's write-through: the database first, then the working copy)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from orchestrator.storage._atomic import atomic_write, published_under


class Refused(Exception):
    pass


def test_a_write_under_the_root_is_published_before_it_lands(tmp_path: Path) -> None:
    root = tmp_path / "state"
    seen: list[tuple[Path, bytes, bool]] = []

    def publish(path: Path, data: bytes) -> None:
        seen.append((path, data, path.exists()))

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

    def publish(path: Path, data: bytes) -> None:
        raise Refused(path.name)

    with published_under(root, publish), pytest.raises(Refused):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_every_thread_publishes_not_only_the_one_that_registered(tmp_path: Path) -> None:
    root = tmp_path / "state"
    seen: list[str] = []
    with published_under(root, lambda path, data: seen.append(path.name)):
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
        published_under(tmp_path, lambda path, data: None),
        pytest.raises(RuntimeError, match="already published"),
        published_under(tmp_path / ".", lambda path, data: None),
    ):
        pass


def test_a_removed_file_is_forgotten_where_it_is_published_first(tmp_path: Path) -> None:
    from orchestrator.storage._atomic import remove_file

    root = tmp_path / "state"
    target = root / "runs" / "a.json"
    atomic_write(target, b"x")
    forgotten: list[tuple[Path, bool]] = []
    with published_under(root, lambda path, data: None, lambda path: forgotten.append(
        (path, path.exists())
    )):  # fmt: skip
        remove_file(target)
        remove_file(target)  # gone already: fine, and still forgotten (it may be elsewhere)
    assert forgotten == [(target, True), (target, False)]
    assert not target.exists()
    remove_file(target)  # no publisher: just gone
