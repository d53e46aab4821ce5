"""The RE2 pre-pass of the evidence scan: how a pattern is widened for RE2, and that a
platform without RE2 gets no pre-pass (the scan then runs ``re`` alone; the evidence
tests run every scan both ways and require the same hits)."""

from __future__ import annotations

import pytest

from orchestrator.reading.prefilter import prefilter_for, widened


@pytest.mark.parametrize(
    ("pattern", "wide"),
    [
        (rb"a*+b", rb"a*b"),
        (rb"a++b", rb"a+b"),
        (rb"a?+b", rb"a?b"),
        (rb"a{2,3}+b", rb"a{2,3}b"),
        (rb"(?:ab)?+c", rb"(?:ab)?c"),
        # An escaped '+' is a literal; the '+' after it is a repeat, not a possessive mark.
        (rb"\++x", rb"\++x"),
        (rb"a*?b", rb"a*?b"),
        (rb"(?>\d+ )x", rb"(?:\d+ )x"),
        (rb"x(?<=a(?:b|c))y(?!z)", rb"xy"),
        (rb"(?<!q)\bfoo\b", rb"foo"),
        # What looks like syntax inside a class is a member.
        (rb"[(?<=+]x", rb"[(?<=+]x"),
        (rb"[\]+]+x", rb"[\]+]+x"),
        (rb"[^\n]*+:", rb"[^\n]*:"),
    ],
)
def test_widening_drops_what_re2_lacks_and_nothing_else(pattern: bytes, wide: bytes) -> None:
    assert widened(pattern) == wide


def test_an_unbalanced_look_around_is_refused() -> None:
    with pytest.raises(ValueError, match="unbalanced"):
        widened(rb"a(?<=b")


def test_without_re2_there_is_no_prepass() -> None:
    assert prefilter_for([rb"x"], import_re2=lambda: None) is None
