"""The gated reading of lines (``signs.read_up``, with ``literals.needed``'s words before
each pattern) decides every line exactly as the plain loop it replaced: on every line of
the real CI logs beside the project, and on generated lines built from the signs' own
words, in any case, with the characters ``re`` folds beyond ASCII."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.domain.log_line import without_prefix
from orchestrator.domain.terminal import plain
from orchestrator.reading.literals import alternatives, needed
from orchestrator.reading.prefilter import any_word
from orchestrator.reading.signs import (
    _ANNOTATION,
    _CODE_REPORTS_GATED,
    _CODE_SIGNS_GATED,
    _SIGNS_GATED,
    CODE,
    CODE_REPORTS,
    CODE_SIGNS,
    KILLED_STATUS,
    NOT_FOUND_STATUS,
    SIGNS,
    Recognised,
    Sign,
    _gate_view,
    _one_line,
    read_lines_up,
    read_up,
    tail_lines,
)

from conftest import examples

ROOT = Path(__file__).resolve().parents[2]
# Where tests/eval/test_ci_logs_eval.py finds the corpus: beside the project (or a worktree).
_PLACES = (ROOT.parent / "shared", ROOT.parent.parent / "shared")
CI_LOGS = next((p / "data" / "ci-logs" for p in _PLACES if (p / "data" / "ci-logs").is_dir()), None)

STATUSES = (1, None, NOT_FOUND_STATUS, KILLED_STATUS)


@functools.cache
def _ungated(stripped: str) -> tuple[bool, tuple[Sign, ...], bool]:
    """What every check says of one line without the gates: an assertion, the signs whose
    pattern matches (less their ``unless``) in table order, a report about the code. Kept
    per line: the exit status only picks among the signs, so each log's tail, read once per
    status, runs the patterns once (they are most of this file's time)."""
    signs = tuple(
        sign
        for sign in SIGNS
        if sign.pattern.search(stripped)
        and not (sign.unless is not None and sign.unless.search(stripped))
    )
    return CODE_SIGNS.search(stripped) is not None, signs, CODE_REPORTS.search(stripped) is not None


def reference(
    lines: Iterable[str], *, exit_code: int | None, timed_out: bool
) -> Recognised | Literal["code"] | None:
    """``read_up`` without the gates: every check run on every line (the symptom's look-up
    above is ``read_lines_up``'s, shared: it is not what the gates change)."""
    if timed_out:
        return CODE
    killed = exit_code == KILLED_STATUS

    def decide(line: str) -> Recognised | Literal["code"] | None:
        stripped = without_prefix(plain(line).strip()).strip()
        if stripped.startswith("::") and (note := _ANNOTATION.match(stripped)) is not None:
            stripped = stripped[note.end() :].strip()
        if not stripped:
            return None
        assertion, signs, report = _ungated(stripped)
        if assertion:
            return CODE
        for sign in signs:
            if sign.needs_status is not None and exit_code != sign.needs_status:
                continue
            if sign.needs_kill and not killed:
                continue
            return Recognised(sign, _one_line(stripped))
        if report:
            return CODE
        return None

    return read_lines_up(((-i, line) for i, line in enumerate(lines)), decide)


def assert_same(line: str) -> None:
    for status in STATUSES:
        assert read_up([line], exit_code=status, timed_out=False) == reference(
            [line], exit_code=status, timed_out=False
        ), (line, status)


def test_every_check_splits_back_into_itself() -> None:
    for pattern in (CODE_SIGNS, CODE_REPORTS, *(sign.pattern for sign in SIGNS)):
        parts = alternatives(pattern.pattern)
        assert "|".join(parts) == pattern.pattern
        for part in parts:
            re.compile(part, pattern.flags)  # each one a whole expression


def test_the_words_are_what_a_match_needs() -> None:
    assert needed(r"\bENOSPC\b", re.IGNORECASE) == frozenset({"enospc"})
    assert needed(r"\b(?:TLS|SSL) handshake (?:timeout|failed)") == frozenset({" handshake "})
    assert needed(r"^(?=.*(?:pypi\.org|ghcr\.io))(?=.*\b5\d\d)") == frozenset(
        {"pypi.org", "ghcr.io"}
    )
    assert needed(r"(?:foo|bar)?baz") == frozenset({"baz"})
    assert needed(r"(?:foo|\d+)x") is None  # a branch that needs nothing: no gate
    assert needed(r"(?>abcd)+") == frozenset({"abcd"})
    assert needed(r"^[A-Z]{1,3}\d{2,4} ") is None


def test_any_word_finds_each_word_as_it_is_spelt() -> None:
    found = any_word([b"a (b", b"x.y", b"[errno 12]"])
    assert found is not None  # RE2 is installed here
    for text, hit in ((b"..a (b..", True), (b"x.y", True), (b"xzy", False), (b"a b", False)):
        assert (found.search(text, 0, len(text)) is not None) == hit
    assert found.search(b"[errno 12] x", 0, 12) is not None


# The signs' patterns grew to some 220 alternatives (issue 44); ungated, Python's re runs
# each on every line: every 64th line keeps this test near ten seconds of CPU.
SAMPLE_EVERY = 64


@pytest.mark.slow
@pytest.mark.skipif(CI_LOGS is None, reason="no ci-logs corpus beside the project")
def test_every_line_of_the_real_logs_is_read_as_before() -> None:
    """Each log's tail read up from its end decides as the reference does, under any exit
    status. And each check, gated, answers as its pattern on the distinct lines as read
    (after colours and prefixes): every 64th distinct line in sorted order here (about
    4,600 of 296,000; all of them took three minutes of CPU, and matched when the gate was
    written),
    so ``read_up`` decides those lines as the reference does."""
    assert CI_LOGS is not None
    lines: set[str] = set()
    logs = sorted(p for p in CI_LOGS.rglob("*") if p.is_file() and p.suffix != ".json")
    assert len(logs) >= 114
    for path in logs:
        text = path.read_bytes().decode("utf-8", "replace")
        tail = tail_lines(text)
        for status in STATUSES:
            assert read_up(reversed(tail), exit_code=status, timed_out=False) == reference(
                reversed(tail), exit_code=status, timed_out=False
            )
        lines.update(text.splitlines())
    assert len(lines) > 100_000
    checks = (_CODE_SIGNS_GATED, *(gated for _, gated in _SIGNS_GATED), _CODE_REPORTS_GATED)
    for line in map(_stripped, sorted(lines)[::SAMPLE_EVERY]):
        low = _gate_view(line)
        for gated in checks:
            assert gated.search(line, low) == (gated.pattern.search(line) is not None), (
                line,
                gated.pattern.pattern,
            )


def _stripped(line: str) -> str:
    stripped = without_prefix(plain(line).strip()).strip()
    if stripped.startswith("::") and (note := _ANNOTATION.match(stripped)) is not None:
        stripped = stripped[note.end() :].strip()
    return stripped


# Lines made of the signs' own words and what surrounds them in logs, in any case, with
# characters ``re`` folds into ASCII letters under IGNORECASE (the long s, the dotless i,
# the Kelvin sign) and a CI runner's prefix or colours now and then.
_WORDS = sorted(
    {
        word
        for pattern in (CODE_SIGNS, CODE_REPORTS, *(sign.pattern for sign in SIGNS))
        for part in alternatives(pattern.pattern)
        for word in needed(part, pattern.flags) or ()
    }
)
_PIECES = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(
        [
            " ",
            ": ",
            "E ",
            "E   ",
            "bash: line 1: ",
            "sh: ",
            "4242 ",
            "Killed",
            "MemoryError",
            "npm ERR! ",
            "429",
            "503",
            "401",
            "124",
            " not found",
            "command not found: x",
            "src/a.py:3:8: ",
            "E501 ",
            "F401 [*] ",
            "error[E0425]",
            "x.c:1:2: error",
            "✖ ",
            "Found 2 errors",
            "3 problems",
            "::error file=a.py::",
            "\x1b[31m",
            "\x1b[0m",
            "2026-12-01T02:53:12.1234567Z ",
            "ſ",
            "ı",
            "\u212a",
            "İ",
            "é",
            "\t",
            "…",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
)


@pytest.mark.slow
@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(_PIECES, max_size=8), st.booleans())
def test_generated_lines_are_read_as_before(pieces: list[str], swap: bool) -> None:
    line = "".join(pieces)
    assert_same(line.swapcase() if swap else line)
