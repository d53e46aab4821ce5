"""What a mechanical fix's recipe may ship, decided without running anything: the
paths a check protects (declared, or by default its own files and the tests it runs),
which changed paths they cover, and what the recipe left uncommitted."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

# Words in a check's command that say it runs a test suite, and where suites live.
_TEST_RUNNERS = frozenset({"test", "tests", "pytest", "py.test", "unittest", "nose2", "tox", "nox"})
_TEST_DIRECTORIES = frozenset({"test", "tests"})
TEST_DISCOVERY = ("tests/**", "test/**", "**/test_*.py", "**/*_test.py", "**/conftest.py")


def default_protected(argv: tuple[str, ...], own_files: list[str]) -> list[str]:
    """What a recipe may not change when the check declares nothing: the check's own
    files and, when its command runs tests, the test directories it names and the
    places test discovery looks."""
    patterns = list(own_files)
    words = [w.strip("'\"") for arg in argv for w in arg.split()]
    for word in words:
        parts = [p for p in word.split("/") if p not in ("", ".")]
        for index, part in enumerate(parts):
            if part in _TEST_DIRECTORIES:
                patterns.append("/".join(parts[: index + 1]) + "/**")
                break
    if any(Path(word).name in _TEST_RUNNERS for word in words):
        patterns.extend(TEST_DISCOVERY)
    return list(dict.fromkeys(patterns))


def _matches(path: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    return (
        fnmatchcase(path, pattern)
        or fnmatchcase(path, pattern + "/*")  # a directory protects what is inside it
        or (pattern.startswith("**/") and fnmatchcase(path, pattern[3:]))
    )


def protected_hits(paths: list[str], patterns: list[str]) -> list[str]:
    """The ``paths`` (relative to the clone) a protected glob covers; ``*`` crosses ``/``."""
    return sorted({p for p in paths if any(_matches(p, pattern) for pattern in patterns)})


def uncommitted(before: list[str] | None, after: list[str] | None) -> list[str]:
    """The ``git status`` entries the recipe added: work it did and did not commit.
    Unknown status (git failed) counts as a change: the check must be of what ships."""
    if after is None or before is None:
        return ["(git status failed)"]
    return [entry for entry in after if entry not in before]
