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
from orchestrator.reports.run_reader import Files, _Workspace


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


def test_a_runs_files_are_looked_for_in_its_directory_as_path_relative_to_said(
    tmp_path: Path,
) -> None:
    _tree(tmp_path)
    here = tmp_path / "state/runs/R-1"
    recorded_dirs = ["/elsewhere/runs/R-1", "/elsewhere/runs/R-1/", "/", str(here), "runs/R-1"]
    recorded = [
        "/elsewhere/runs/R-1/logs/001-build.log",
        "/elsewhere/runs/R-1/./logs/001-build.log",
        "/elsewhere/runs/R-1//logs/to-elsewhere.log",
        "/elsewhere/runs/R-1/../R-1/logs/001-build.log",
        "/elsewhere/runs/R-1",
        "/elsewhere/runs/R-10/logs/001-build.log",
        "//elsewhere/runs/R-1/logs/001-build.log",
        str(here / "logs/001-build.log"),
        str(tmp_path / "elsewhere/real.log"),
        "runs/R-1/logs/001-build.log",
        "logs/001-build.log",
    ]

    def before(recorded_dir: str, given: str) -> Path | None:
        path, base = Path(given), Path(recorded_dir)
        found = here / path.relative_to(base) if path.is_relative_to(base) else path
        return found.resolve() if found.is_file() else None

    for recorded_dir in recorded_dirs:
        workspace = _Workspace(recorded_dir, here, Files())
        for given in recorded:
            assert workspace.file(given) == before(recorded_dir, given), (recorded_dir, given)
