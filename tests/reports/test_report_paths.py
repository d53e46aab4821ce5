"""The report finds and links thousands of files (issue 41): each directory is resolved
once and each link's relative path is built from its directory's, and the answers are the
ones ``Path.resolve`` and ``os.path.relpath`` give file by file: through symbolic links,
dangling ones, ``.`` and ``..``, the page's own directory and those above it."""

from __future__ import annotations

import itertools
import os
from html import escape
from pathlib import Path
from urllib.parse import quote

from orchestrator.reports.page_parts import Links
from orchestrator.reports.run_reader import Files


def _tree(root: Path) -> list[str]:
    (root / "state/runs/R-1/logs").mkdir(parents=True)
    (root / "state/runs/R-1/logs/001-build.log").write_text("x")
    (root / "state/runs/R-1.verdict-1.json").write_text("{}")
    (root / "elsewhere").mkdir()
    (root / "elsewhere/real.log").write_text("x")
    (root / "linked-state").symlink_to(root / "state")
    (root / "state/runs/R-1/logs/to-elsewhere.log").symlink_to(root / "elsewhere/real.log")
    (root / "state/runs/R-1/logs/dangling.log").symlink_to(root / "gone.log")
    (root / "state/runs/R-1/elsewhere").symlink_to(root / "elsewhere")
    return [
        "state/runs/R-1/logs/001-build.log",
        "linked-state/runs/R-1/logs/001-build.log",
        "state/runs/R-1.verdict-1.json",
        "linked-state/runs/R-1.verdict-1.json",
        "state/runs/R-1/logs/to-elsewhere.log",
        "state/runs/R-1/logs/dangling.log",
        "state/runs/R-1/elsewhere/real.log",
        "state/runs/R-1/./logs/001-build.log",
        "linked-state/runs/../runs/R-1.verdict-1.json",
        "state/runs/R-1/logs",
        "state/runs/R-1/logs/missing.log",
        "missing/dir/file.log",
    ]


def test_found_files_resolve_as_path_resolve_does(tmp_path: Path) -> None:
    files = Files()
    for name in _tree(tmp_path) * 2:  # the second round from what was kept
        for given in (str(tmp_path / name), tmp_path / name):
            path = Path(given)
            expected = path.resolve() if path.is_file() else None
            assert files(given) == expected, name
    assert files(None) is None and files("") is None


def test_links_are_what_relpath_says_from_any_page_directory(tmp_path: Path) -> None:
    names = _tree(tmp_path)
    pages = ["site", "state", "state/runs", "state/runs/R-1/logs", ".", "a/b/c", "elsewhere"]
    for page_dir in pages:
        links = Links(tmp_path / page_dir / "report.html")
        base = os.path.abspath(tmp_path / page_dir)
        targets = [tmp_path / n for n in names] + [
            tmp_path / page_dir, tmp_path, tmp_path.parent, Path("/"), tmp_path / "x y é%.log",
        ]  # fmt: skip
        for target in itertools.chain(targets, targets):
            relative = Path(os.path.relpath(os.path.abspath(target), base)).as_posix()
            assert links.href(target) == escape(quote(relative, safe="/"), quote=True), (
                page_dir,
                target,
            )
