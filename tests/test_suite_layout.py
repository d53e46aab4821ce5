"""Where the tests live: a folder of test files mirrors a folder of the package
(tests/batch/celery/ tests orchestrator/batch/celery/), and the helpers tests share are
modules of tests/support/, never loose beside the tests they serve."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "orchestrator"
# The folders that mirror no package folder, each for a reason of its own.
OWN_FOLDERS = {
    "bench": "the benchmarks' tests (bench/ sits beside the package)",
    "contract": "the contract tests against the real agents and model APIs, and their servers",
    "corpus": "the labelled failure corpus made by real tools (python -m corpus.build)",
    "docs": "the documentation site and its generated reference",
    "e2e": "the slow end-to-end cases",
    "support": "the helpers tests share",
}


def _own(path: Path) -> bool:
    return bool(path.parts) and path.parts[0] in OWN_FOLDERS


def test_every_folder_of_tests_mirrors_a_folder_of_the_package() -> None:
    folders = {p.parent.relative_to(TESTS) for p in TESTS.rglob("test_*.py")}
    astray = sorted(
        str(f) for f in folders if f.parts and not _own(f) and not (PACKAGE / f).is_dir()
    )
    assert astray == []


def test_the_helpers_tests_share_live_in_support() -> None:
    helpers = [
        p.relative_to(TESTS)
        for p in TESTS.rglob("*.py")
        if not p.name.startswith("test_") and p.name not in ("conftest.py", "__init__.py")
    ]
    astray = sorted(str(p) for p in helpers if not _own(p))
    assert astray == []
