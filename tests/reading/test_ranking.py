"""What a log line is worth to a reader looking for the cause: pinned without fixtures,
then through the evidence of real files (a baseline demotes what green runs print)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.line_templates import template_of
from orchestrator.reading.evidence import extract_evidence, render_evidence
from orchestrator.reading.prefix import learn_prefix, split_prefix
from orchestrator.reading.ranking import CONFIDENT_SCORE, benign, consequence, score, vocabulary


def words(line: bytes, count: int = 1, known: bool | None = None) -> float:
    return score(3, line, count=count, known=known, words_only=True)


@pytest.mark.parametrize(
    "line",
    [
        b"/usr/bin/ld: ../libfoo/.libs/libfoo.so: undefined reference to `foo_init'",
        b"npm error `npm ci` can only install packages when your package.json is in sync",
        b"[task 2019-10-01T00:00:00.000Z] 12:00:00 ERROR - application crashed",
        b"Package required but not available: 'lubridate'",
        b"voluptuous.error.MultipleInvalid: required key not provided @ data['x']",
        b"==16563==ERROR: AddressSanitizer: SEGV on unknown address 0x000001d548d0",
    ],
)
def test_a_failure_stated_is_a_confident_cause(line: bytes) -> None:
    assert words(line) >= CONFIDENT_SCORE


@pytest.mark.parametrize(
    "line",
    [
        # Mentioned in passing, in prose or a configure probe.
        b"     to always fail with ENOSYS.  Some functions are actually named",
        b"checking whether the compiler handles errors... yes",
        # A test reported passed or skipped, whatever its name says.
        b"[ RUN      ] spellfile errors out when prefcond section is truncated: 2.79 ms OK",
        b"io.reactivex.SafeSubscriberTest > onErrorFailureWithUnsubscribeFailure SKIPPED",
        b"test_fails_cleanly ... ok",
        # Tallies of nothing; flags.
        b"Ran 120 tests: 0 failures, 0 errors",
        b"gcc -Werror=implicit-function-declaration -c x.c",
    ],
)
def test_a_mention_a_pass_or_a_tally_of_nothing_is_not(line: bytes) -> None:
    assert words(line) < CONFIDENT_SCORE


@pytest.mark.parametrize(
    "line",
    [
        b"make: *** [Makefile:561: all-recursive] Error 1",
        b'The command "npm test" exited with 1.',
        b"##[error]Process completed with exit code 1.",
        b"npm ERR! code ELIFECYCLE",
        b"collect2: error: ld returned 1 exit status",
        b"  5 failing",
    ],
)
def test_a_consequence_says_that_a_step_failed_not_why(line: bytes) -> None:
    assert consequence(line)
    assert score(1, line, count=1, known=None) < CONFIDENT_SCORE


def test_a_timeout_or_a_kill_status_says_why() -> None:
    assert not consequence(b'The command "$TIMEOUT 35m ci/build.sh" exited with 124.')
    assert benign(b"errors: 0") and not benign(b"errors: 3")


def test_what_green_runs_print_is_ordinary_and_what_they_never_print_ranks_higher() -> None:
    line = b"error: deprecated API used in build.rs"
    assert (
        score(2, line, count=1, known=True) < CONFIDENT_SCORE <= score(2, line, count=1, known=None)
    )
    assert score(2, line, count=1, known=False) > score(2, line, count=1, known=None)


def test_a_line_every_file_prints_is_worth_less_than_one_said_once() -> None:
    line = b"warning: unused variable 'x' is deprecated"
    assert words(line, count=500) < words(line, count=1)


def test_error_words_are_found_anywhere_in_a_line_whatever_its_prefix() -> None:
    search, window = vocabulary()
    assert window > 0
    for line in (
        b"2019-01-01 12:00:00.123456 | ERROR: Could not install packages",
        b"##[error]Cannot find module 'x'",
        b"\xe2\x94\x82 Error: No valid credential sources found",
        b"  LocalJumpError:",
    ):
        assert search.search(line, 0, len(line)) is not None, line
    for line in (b"onerror handler installed", b"terrorism studies", b"all good"):
        assert search.search(line, 0, len(line)) is None, line


def test_a_prefix_is_learned_from_the_log_and_taken_off_only_where_it_is() -> None:
    said = [b"TASK [install] ****", b"ok: [localhost]", b"changed: [localhost]", b"PLAY RECAP"]
    lines = [b"2017-11-10 02:43:%02d.%06d | %s %d" % (i % 60, i, said[i % 4], i) for i in range(40)]
    prefix = learn_prefix(lines)
    assert prefix is not None and prefix.tokens == 3
    assert split_prefix(b"2017-11-10 02:44:00.000001 | E305 expected 2 blank lines", [prefix])[
        1
    ] == (b"E305 expected 2 blank lines")
    # A line some other program printed into the log keeps its own start.
    assert split_prefix(b"Traceback (most recent call last):", [prefix])[1] == (
        b"Traceback (most recent call last):"
    )
    # A box-drawing gutter is one (terraform, rich).
    boxed = [
        ("\u2502 " + w + f" {i}").encode()
        for i, w in enumerate(["Error:", "with x,", "on main.tf"] * 10)
    ]
    gutter = learn_prefix(boxed)
    assert gutter is not None and gutter.tokens == 1
    # Lines that start with the same plain words share no prefix.
    assert learn_prefix([b"checking for gcc %d... yes" % i for i in range(40)]) is None


def test_the_evidence_spends_its_budget_by_rank_not_first_come(tmp_path: Path) -> None:
    # Fifty mentions early, the cause late: the cause is shown, first.
    mentions = [f"note: the retry helper handles failures of kind {i}" for i in range(50)]
    body = ["ordinary line"] * 200
    log = tmp_path / "log"
    log.write_text(
        "\n".join([*mentions, *body, "src/deal.c:12:5: error: 'total' undeclared", *body]) + "\n"
    )
    evidence = extract_evidence(log, window_bytes=1 << 20, max_bytes=600, max_excerpts=2)
    assert evidence.confident
    assert "'total' undeclared" in evidence.excerpts[0].text


def test_a_baseline_demotes_what_green_runs_print(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("ordinary\nERROR: cache server unreachable, building without it\nordinary\n")
    green = {template_of(b"ERROR: cache server unreachable, building without it")}
    alone = extract_evidence(log, window_bytes=1 << 20, max_bytes=4096)
    assert alone.confident and "cache server" in render_evidence(alone)
    known = extract_evidence(log, window_bytes=1 << 20, max_bytes=4096, known=green.__contains__)
    assert not known.confident and "cache server" not in render_evidence(known)
