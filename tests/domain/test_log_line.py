"""The prefixes a CI runner or a build tool puts before a program's line."""

from __future__ import annotations

import pytest

from orchestrator.domain.log_line import without_prefix


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("2026-12-01T02:53:12.1234567Z E   assert 1", "E   assert 1"),  # GitHub Actions
        ("2026-12-01 02:53:12,123 ERROR: x", "ERROR: x"),
        ("#8 1.234 E   assert 1", "E   assert 1"),  # docker BuildKit, a step's output
        ("#63 1753.0 chmod -R ug+rwx x", "chmod -R ug+rwx x"),
        ("[2026-12-01T02:53:12.123Z] FAILED t.py::t", "FAILED t.py::t"),  # Jenkins
        ("2026-12-01T02:53:12.123456Z 00O E   assert 1", "E   assert 1"),  # GitLab, stdout
        ("2026-12-01T02:53:12.123456Z 0aE ERROR: x", "ERROR: x"),  # GitLab, stderr
        # GitLab's continuation of the line before is not a line start: it keeps its mark.
        ("2026-12-01T02:53:12.123456Z 00O+E   assert 1", "00O+E   assert 1"),
        # Not prefixes: BuildKit's own status line, a bare date, a second prefix.
        ("#8 ERROR: process failed", "#8 ERROR: process failed"),
        ("[2026-12-01] x", "[2026-12-01] x"),
        ("#8 1.5 #9 2.5 x", "#9 2.5 x"),
        ("E   assert 1", "E   assert 1"),
    ],
)
def test_the_prefix_goes_and_the_programs_words_stay(line: str, words: str) -> None:
    assert without_prefix(line) == words
