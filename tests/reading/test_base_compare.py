"""A failing check judged against its failure on the base commit (``on_red_base =
"compare"``): only failing lines whose template the base's failing log never printed
count. ``judge`` is pure; the two readers are given small logs."""

from __future__ import annotations

from pathlib import Path

from orchestrator.domain.line_templates import template_of
from orchestrator.reading.base_compare import (
    FailingLine,
    base_templates,
    failing_lines,
    judge,
)

BASE_LOG = (
    "collected 3 items\n"
    "tests/test_cards.py::test_deal FAILED\n"
    "FAILED tests/test_cards.py::test_deal - AssertionError: assert 4 == 5\n"
    "1 failed, 2 passed in 0.12s\n"
)


def line(text: str) -> FailingLine:
    return FailingLine(template_of(text.encode()), text.encode())


def known(*texts: str) -> set[bytes]:
    return {template_of(t.encode()) for t in texts}


def test_a_failure_the_base_printed_too_is_already_on_the_base() -> None:
    # Other numbers, same template: the same failure.
    seen = known("FAILED tests/test_cards.py::test_deal - AssertionError: assert 4 == 5")
    failing = [line("FAILED tests/test_cards.py::test_deal - AssertionError: assert 3 == 5")]
    judgment = judge(failing, seen.__contains__, exit_code=1, timed_out=False, base_exit_code=1)
    assert judgment.already_on_base
    assert judgment.describe() == "failures already on the base"


def test_a_failing_line_the_base_never_printed_is_new() -> None:
    seen = known("FAILED tests/test_cards.py::test_deal - AssertionError: assert 4 == 5")
    failing = [
        line("FAILED tests/test_cards.py::test_deal - AssertionError: assert 4 == 5"),
        line("FAILED tests/test_cards.py::test_shuffle - AssertionError: same order"),
    ]
    judgment = judge(failing, seen.__contains__, exit_code=1, timed_out=False, base_exit_code=1)
    assert not judgment.already_on_base and judgment.new_count == 1
    assert judgment.new == (
        b"FAILED tests/test_cards.py::test_shuffle - AssertionError: same order",
    )
    assert "test_shuffle" in judgment.describe()


def test_a_timeout_or_an_unexplained_new_exit_code_is_never_the_bases() -> None:
    timed_out = judge([], set().__contains__, exit_code=124, timed_out=True, base_exit_code=1)
    assert not timed_out.already_on_base
    judgment = judge([], set().__contains__, exit_code=2, timed_out=False, base_exit_code=1)
    assert not judgment.already_on_base
    assert judgment.describe() == (
        "no failing line to compare, and it exited 2 where the base exited 1"
    )
    # Nothing to compare, but it fails as the base did.
    assert judge(
        [], set().__contains__, exit_code=1, timed_out=False, base_exit_code=1
    ).already_on_base


def test_the_readers_compare_a_failing_log_with_the_bases(tmp_path: Path) -> None:
    base = tmp_path / "base.log"
    base.write_text(BASE_LOG)
    again = tmp_path / "again.log"
    again.write_text(BASE_LOG.replace("0.12s", "0.31s"))
    worse = tmp_path / "worse.log"
    worse.write_text(
        BASE_LOG.replace(
            "1 failed",
            "FAILED tests/test_cards.py::test_shuffle - KeyError: 'spades'\n2 failed",
        )
    )
    on_base = base_templates(base, check="tests", repo="r", max_bytes=1 << 20)

    def verdict(log: Path) -> bool:
        found = failing_lines(log, window_bytes=1 << 20)
        assert found  # the reading ranks its failing lines
        return judge(
            found, on_base.knows, exit_code=1, timed_out=False, base_exit_code=1
        ).already_on_base

    assert verdict(again)
    assert not verdict(worse)
