"""A big file (the report's page over thousands of runs) is written a part at a time as
it is made, never held whole (issue 41: the report's memory), with the same guarantees as
a file written at once: atomic, its mode, and whole when it is published."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.storage._atomic import atomic_write, published_under
from orchestrator.storage.published import publish


def parts(count: int) -> Iterator[str]:
    for n in range(count):
        yield f"<p>run {n} é—✓</p>\n"


def test_parts_land_as_the_whole_text_would(tmp_path: Path) -> None:
    whole = tmp_path / "whole.html"
    in_parts = tmp_path / "site" / "parts.html"
    in_parts.parent.mkdir()
    publish(whole, "".join(parts(500)), what="--out")
    publish(in_parts, parts(500), what="--out")
    assert in_parts.read_bytes() == whole.read_bytes()
    assert os.stat(in_parts).st_mode & 0o777 == os.stat(whole).st_mode & 0o777
    assert [p.name for p in in_parts.parent.iterdir()] == ["parts.html"]  # no temp file


def test_a_part_that_fails_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("the page before")

    def failing() -> Iterator[bytes]:
        yield b"<p>half"
        raise RuntimeError("the page could not be made")

    with pytest.raises(RuntimeError, match="could not be made"):
        atomic_write(page, failing())
    assert page.read_text() == "the page before"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_published_file_written_in_parts_is_published_whole(tmp_path: Path) -> None:
    published: list[bytes] = []

    def keep(path: Path, data: bytes) -> bool:
        published.append(data)
        return False

    with published_under(tmp_path, keep):
        atomic_write(tmp_path / "page.html", (p.encode() for p in parts(3)))
    assert published == ["".join(parts(3)).encode()]
    assert (tmp_path / "page.html").read_bytes() == published[0]
