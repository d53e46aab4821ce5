"""The prefixes a CI runner or a build tool puts before a program's line."""

from __future__ import annotations

import pytest

from orchestrator.domain.log_line import has_columns, without_columns, without_prefix


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
        # gh run view --log: the job's and the step's names, then the timestamp (a
        # step's first line with a byte-order mark before it)
        ("test\tRun pytest\t2026-12-01T02:53:12.1234567Z E   assert 1", "E   assert 1"),
        ("build / py3.11\tSet up job\t\ufeff2026-12-01T02:53:10.5Z Runner 2.3", "Runner 2.3"),
        ("\t\t2026-12-01T02:53:12Z FAILED t.py::t", "FAILED t.py::t"),
        # Tab-separated words of a program's own, with no timestamp after two columns
        ("ok  \texample.com/deal\t0.003s", "ok  \texample.com/deal\t0.003s"),
        ("a\t2026-12-01T02:53:12Z x", "a\t2026-12-01T02:53:12Z x"),
        ("a\tb\tc\t2026-12-01T02:53:12Z x", "a\tb\tc\t2026-12-01T02:53:12Z x"),
        # Not prefixes: BuildKit's own status line, a bare date, a second prefix.
        ("#8 ERROR: process failed", "#8 ERROR: process failed"),
        ("[2026-12-01] x", "[2026-12-01] x"),
        ("#8 1.5 #9 2.5 x", "#9 2.5 x"),
        ("E   assert 1", "E   assert 1"),
    ],
)
def test_the_prefix_goes_and_the_programs_words_stay(line: str, words: str) -> None:
    assert without_prefix(line) == words


@pytest.mark.parametrize(
    ("data", "plain"),
    [
        (
            b"test\tRun pytest\t2026-12-01T02:53:12Z E   assert 1\n",
            b"2026-12-01T02:53:12Z E   assert 1\n",
        ),
        (
            b"j\ts\t\xef\xbb\xbf2026-12-01T02:53:10Z one\nplain two\nj\ts\t2026-12-01T02:53:11Z three",
            b"2026-12-01T02:53:10Z one\nplain two\n2026-12-01T02:53:11Z three",
        ),
        (b"ok  \tpkg\t0.003s\n", b"ok  \tpkg\t0.003s\n"),
        (b"no tab at all\n", b"no tab at all\n"),
    ],
)
def test_gh_columns_go_and_the_lines_stay(data: bytes, plain: bytes) -> None:
    assert without_columns(data) == plain
    assert without_columns(data).count(b"\n") == data.count(b"\n")
    assert has_columns(data, 0, len(data)) == (plain != data)
