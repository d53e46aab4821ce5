"""Evidence: the root-cause lines of a long log, found by tool-aware signatures.

The end of a log is often ordinary output (the rest of a test run, a summary, a cleanup)
and the line that says what went wrong — the assertion, the F401, the first mypy error,
``No matching distribution`` — lies far above it. This module scans a bounded window at
the end of the log for lines that tools print when something fails and returns them as
excerpts with their line numbers and a few lines of context.

Signatures are data (``SIGNATURES``): a name, a rank (0 = the most telling) and a pattern
that must match at the start of a line (after an optional CI timestamp). They are joined
into one regular expression that begins with ``\\n``: the regex engine jumps from newline
to newline with a fast literal search and tries the alternatives only there. What a line
costs is the number of alternatives the engine tests before giving up on it, so the
joined expression is built to turn an ordinary line away in a few byte tests (see
``_dispatch``): the scan of 64 MiB costs about four times ``grep -c`` with one pattern.

The window is read in fixed-size chunks into one reused buffer: memory stays flat however
big the window. The hits (bounded per signature) are then read back by seeking, with
their context, redacted, and cut to the byte budget.

Pure apart from reading the file it is given: same file, same excerpts.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Protocol

from orchestrator.domain import log_line
from orchestrator.domain.terminal import BARE_CR_BYTES, plain_bytes
from orchestrator.reading import prefix as learned
from orchestrator.reading import ranking, templates
from orchestrator.reading.prefilter import (
    Prefilter,
    class_end,
    prefilter_for,
    units,
    widened,
)
from orchestrator.reading.templates import template_of
from orchestrator.redaction import redact_bytes

__all__ = [
    "CHUNK_BYTES",
    "SIGNATURES",
    "Evidence",
    "EvidenceExcerpt",
    "Hit",
    "Signature",
    "extract_evidence",
    "render_evidence",
    "scan_hits",
]

CHUNK_BYTES: Final = 1 << 20
# A line longer than this is not a tool's error line; its start is not carried over a
# chunk boundary (so memory stays flat on a log without newlines).
MAX_LINE_BYTES: Final = 64 * 1024
# Hits are kept one per (signature, template): the first line of each shape, with how
# many lines had it (a warning every file gets is one hit, counted, not a thousand).
# A noisy log must not grow the list without bound: past this many shapes, new ones are
# not kept (the counts of those kept go on).
MAX_DISTINCT: Final = 4096
# Matching lines named in one scan: a log that is one long storm of error lines stops
# being read there (its first lines are the telling ones), which bounds the time.
MAX_MATCHES: Final = 200_000
MAX_EXCERPTS: Final = 8
# Lines one excerpt may span: a block of a hundred alike error lines is shown by the best
# of them and its neighbours, not whole (it would crowd out every other excerpt).
MAX_EXCERPT_LINES: Final = 15
# Lines shown around a matched line (each side).
CONTEXT_LINES: Final = 3
# Each shown line is cut to this many bytes: one minified line must not eat the budget.
MAX_SHOWN_LINE_BYTES: Final = 400
# Read around a hit when building its excerpt: a whole line of the longest kept, plus a
# margin so a secret near the excerpt is redacted whole.
_READ_AROUND_BYTES: Final = MAX_LINE_BYTES


@dataclass(frozen=True)
class Signature:
    """A line a tool prints when something failed. ``pattern`` matches at the start of
    the line (bytes, no anchor, forms joined by ``|``) or, when ``located``, right after
    a leading file path (``src/deal.c``); ``rank`` orders the excerpts (0 first)."""

    name: str
    rank: int
    pattern: bytes
    located: bool = False
    # For the RE2 pre-pass (see prefilter.py): a form of the whole line (after a
    # timestamp) with no look-around that accepts every line ``pattern`` accepts. None:
    # ``pattern`` with its look-arounds dropped is narrow enough.
    prefilter: bytes | None = None


# A leading file path: its bytes are spelled out (``\\w`` is ``[0-9A-Za-z_]`` for bytes,
# but a class with a category is tested byte by byte through a slower routine). The
# repeat is possessive: a path never holds ':' or '(' and is never given back, so a line
# starting with a long word costs one pass.
_PATH_BYTES: Final = rb"0-9A-Za-z_./\\+@~-"
_PATH: Final = b"[" + _PATH_BYTES + b"][" + _PATH_BYTES + b"]*+"

# What the C library says for the errors a build step meets (strerror, and the resolver's
# own two): the end of a `prog: ...: <message>` line.
_ERRNO_TEXTS: Final = (
    b"No space left on device",
    b"Disk quota exceeded",
    b"Read-only file system",
    b"Cannot allocate memory",
    b"Too many open files(?: in system)?",
    b"File too large",
    b"Permission denied",
    b"Operation not permitted",
    b"No such file or directory",
    b"Not a directory",
    b"Is a directory",
    b"Directory not empty",
    b"File exists",
    b"Input/output error",
    b"Broken pipe",
    b"Text file busy",
    b"Device or resource busy",
    b"Argument list too long",
    b"Exec format error",
    b"Invalid cross-device link",
    b"Resource temporarily unavailable",
    b"Connection refused",
    b"Connection reset by peer",
    b"Connection timed out",
    b"No route to host",
    b"Network is unreachable",
    b"Name or service not known",
    b"Temporary failure in name resolution",
)

# A pattern may list several forms (``A|B``). Every form starts with a literal byte or a
# byte class that is not repeated (a located one: right after the path), which lets the
# engine skip, in one test, the forms that cannot start the line at hand; a look-behind
# comes only after some literal bytes matched. Within each kind, order matters: the first
# that matches names the line, so the specific shapes come before the generic ones; all
# plain ones are tried before the located ones.
SIGNATURES: Final[tuple[Signature, ...]] = (
    # pytest: the assertion / exception lines under a failed test, then its summary lines.
    Signature("pytest-assertion", 0, rb"E  +\S"),
    Signature("unittest-summary", 5, rb"FAILED \((?:failures|errors)="),
    Signature("pytest-failed", 2, rb"FAILED \S"),
    Signature("unittest-failure", 2, rb"FAIL: \w+ \("),
    Signature("unittest-error", 2, rb"ERROR: \w+ \("),
    Signature("pytest-error", 2, rb"ERROR \S"),
    # pip (and docker buildkit, which also says ``ERROR:``).
    Signature(
        "pip-no-distribution",
        0,
        rb"ERROR: (?:No matching distribution|Could not find a version that satisfies)",
    ),
    # BuildKit's own line for a failed step (the step's output carries its seconds).
    Signature("docker-step-error", 1, rb"#\d+ ERROR"),
    Signature("error-colon", 2, rb"ERROR: \S"),
    # npm / yarn.
    Signature("npm-error", 1, rb"npm (?:ERR!|error) "),
    # cargo / rustc, and any line starting ``error:`` (yarn, clang driver, git).
    Signature("rustc-error", 0, rb"error\[E\d+\]"),
    Signature("error-line", 2, rb"error(?::| ) ?\S"),
    Signature("rust-panic", 1, rb"thread '[^'\n]*' panicked at"),
    Signature("cargo-test-failed", 2, rb"test \S+ \.\.\. FAILED"),
    Signature("cargo-test-result", 4, rb"test result: FAILED"),
    Signature("fatal", 2, rb"fatal: "),
    # eslint's stylish format: an indented ``line:col  error  message  rule``.
    Signature("eslint-error", 1, rb"[ \t][ \t]*+\d+:\d+[ \t]+error[ \t]"),
    # jest.
    Signature("jest-test", 1, rb"[ \t][ \t]*+\xe2\x97\x8f "),
    Signature("jest-fail", 2, rb"FAIL \S"),
    # go test.
    Signature("go-panic", 1, rb"panic: "),
    Signature("go-test-fail", 1, rb"--- FAIL: "),
    Signature("go-package-fail", 4, rb"FAIL\t"),
    # make.
    Signature("make-error", 3, rb"make(?:\[\d+\])?: \*\*\*"),
    # maven / gradle / the JVM.
    Signature("maven-error", 2, rb"\[ERROR\] \S"),
    Signature("gradle-what-went-wrong", 1, rb"\* What went wrong:"),
    Signature("gradle-failure", 4, rb"FAILURE: "),
    Signature("build-failure", 4, rb"BUILD FAIL(?:URE|ED)"),
    Signature("java-exception", 1, rb"Exception in thread "),
    Signature("java-caused-by", 2, rb"Caused by: "),
    # ruff's own format: the rule code first (``F401 [*] `os` imported but unused``),
    # the location on the next line; its formatter and black say what they would change.
    Signature("ruff-code", 0, rb"[A-Z][A-Z]{0,2}\d{2,4} (?:\[\*\] )?\S"),
    Signature(
        "format-check", 2, rb"[0-9]\d* files? would be reformatted|Would reformat |would reformat "
    ),
    # doctest, and a pytest run that collected nothing.
    Signature("doctest-failed-example", 1, rb"Failed example:"),
    Signature("pytest-no-tests", 2, rb"==* no tests ran"),
    # The shell about a child it ran: killed (an OOM kill looks like this), not found.
    # bash pads the pid to five columns: `line 1:  7155 Killed`.
    Signature(
        "shell-error",
        1,
        b"|".join(
            shell + rb"sh: (?:line \d+: )?"
            rb"(?: *\d+ +(?:Killed|Segmentation fault)|[^\n:]+: command not found)"
            for shell in (b"ba", b"da", b"z", b"")
        ),
    ),
    # This project's own review check (lint-bug-commit-order).
    Signature("commit-order", 0, rb"[0-9a-f][0-9a-f][0-9a-f]{5,38} \"[^\n]*\": touches both"),
    # git.
    Signature("git-conflict", 0, rb"CONFLICT \("),
    Signature("git-merge-failed", 3, rb"Automatic merge failed"),
    # docker (classic builder).
    Signature("docker-returned", 2, rb"The command '[^\n]*' returned a non-zero code"),
    # The coding engines' JSON event streams: codex's error events, Claude Code's result
    # when it is an error (compact or spaced JSON).
    Signature(
        "engine-error-event",
        1,
        rb'\{"type": ?"(?:error|turn\.failed)"'
        rb'|\{"type": ?"result", ?"subtype": ?"[a-z_]+", ?"is_error": ?true',
    ),
    # The runner's own last line when it says why the process ended: timed out, killed
    # by a signal, could not start.
    Signature("runner-ended", 2, rb"# orchestrator: exit -?\d+ after [0-9.]+s \("),
    # A step that names its own failure class (``::failure-class::rate_limited``); the
    # line above it usually says what happened, and is in the excerpt's context.
    Signature("failure-class", 0, rb"::failure-class::[a-z_]"),
    # A GitHub Actions error annotation, as tools print their findings for a workflow
    # (``ruff --output-format=github``, eslint's and pytest's annotation formatters):
    # ``::error file=x.py,line=1,title=...::x.py:1:8: F401 ...`` or ``::error::message``.
    Signature("gha-error-annotation", 1, rb"::error(?:| [^\n]*)::\S"),
    # Located: after a leading path. mypy, gcc/clang, javac, tsc (both formats),
    # ruff/flake8/pylint, go build/vet, the linker, Python's exception lines.
    # After the path, each form starts with one literal byte (':', '(', the newline) and
    # then a byte class or literal text; a look-behind comes only once those matched:
    # lines like `tests/test_deal.py::test_deal PASSED` reach this point, and a
    # look-behind is a sub-match.
    Signature("located-error", 0, rb":\d\d*(?::\d+)?: (?:fatal )?error\b", located=True),
    Signature("tsc-error", 0, rb"\(\d+,\d+\): error TS\d+|:\d\d*:\d+ - error TS\d+", located=True),
    # A linter's rule code after the location, with or without a column
    # (``x.py:3:1: E305``, ``page.md:3: TLDR004``, ``a.sh:7:1: SC2086``).
    Signature("lint-code", 0, rb":\d\d*(?::\d+)?: \[?[A-Z]{1,5}\d{2,4}\b", located=True),
    # mypy's JSON output (``mypy -O json``): one object a line, its file and line first,
    # its severity near the end.
    Signature(
        "json-diagnostic",
        0,
        rb'\{"file": ?"[^"\n]*+", ?"line": ?\d++,[^\n]*?"severity": ?"error"',
    ),
    # go build/vet say what is wrong without a severity; a compiler's ``note:`` only
    # elaborates on an error matched above.
    Signature(
        "located-message",
        3,
        rb":\d(?<=\.(?:go|rs|py|js|ts|cc|cs|kt|rb):\d)\d*:\d+: (?!note:)\S",
        located=True,
        prefilter=b"[" + _PATH_BYTES + rb"]*\.(?:go|rs|py|js|ts|cc|cs|kt|rb):\d+:\d+: \S",
    ),
    Signature(
        "linker-error",
        1,
        rb": error(?<=ld: error)|: fatal(?<=ld: fatal)"
        rb"|: error(?<=collect2: error)|: fatal(?<=collect2: fatal)",
        located=True,
    ),
    # A program's own complaint: `dd: error writing '/dev/full': No space left on device`,
    # `cp: cannot create regular file 'x': Permission denied`. The system's message for
    # a failed call ends the line (the name before it is a path: `/bin/cp`, `tar`).
    Signature(
        "program-error",
        1,
        rb": (?:fatal )?error\b|: [^\n]*?(?:" + b"|".join(_ERRNO_TEXTS) + rb")\r?\n",
        located=True,
    ),
    # The last line of a Python traceback (also unittest's): ``pkg.SomeError: message``.
    # At the end of the line the newline is taken in (the scan never reads a match's
    # end). Each name ends with r, n, t or g: one look-behind turns most paths away.
    Signature(
        "python-exception",
        1,
        rb":(?<=[rntg]:)(?:(?<=Error:)|(?<=Exit:)|(?<=Warning:)|(?<=Exception:|Interrupt:))"
        rb"|\n(?<=[rntg]\n)(?:(?<=Error\n)|(?<=Exit\n)|(?<=Warning\n)"
        rb"|(?<=Exception\n|Interrupt\n))"
        rb"|\r\n(?<=[rntg]\r\n)(?:(?<=Error\r\n)|(?<=Exit\r\n)|(?<=Warning\r\n)"
        rb"|(?<=Exception\r\n|Interrupt\r\n))",
        located=True,
        # Without its look-behinds the pattern is any `<path>:` line (every pytest
        # progress line): the name's ending is spelled out instead.
        prefilter=b"[" + _PATH_BYTES + rb"]*(?:Error|Exit|Warning|Exception|Interrupt)(?::|\r?\n)",
    ),
)


class WordSearch(Protocol):
    def search(self, text: bytes | bytearray, pos: int, endpos: int) -> _Found | None: ...


class _Found(Protocol):
    def start(self) -> int: ...


# A line that holds error words and no signature (``reading.ranking``): ranked by its
# words, its rarity and its shape.
WORDS: Final = Signature("error-words", 3, b"")

# What may come before a tool's line (``domain/log_line.py``: a CI timestamp, docker
# BuildKit's step and seconds, a Jenkins timestamp), taken whole when present: a line that
# has one is not tried again without it.
_PREFIX: Final = rb"(?:" + log_line.PREFIX + rb")?"


_PREFIX_ONLY: Final = re.compile(_PREFIX)
_ERROR_LEVELS: Final = frozenset({b"ERROR", b"FATAL", b"CRITICAL"})


def _ordered(signatures: tuple[Signature, ...]) -> tuple[Signature, ...]:
    """The order the signatures name a line in: plain, then located."""
    return tuple(s for s in signatures if not s.located) + tuple(s for s in signatures if s.located)


def _forms(pattern: bytes) -> list[bytes]:
    """A pattern's top-level alternatives (``A|B`` gives ``A`` and ``B``)."""
    forms, start = [], 0
    for unit, end, depth in units(pattern):
        if unit == b"|" and depth == 0:
            forms.append(pattern[start : end - 1])
            start = end
    forms.append(pattern[start:])
    return forms


_QUANTIFIER: Final = re.compile(rb"(?:[?*+]|\{\d*(?:,\d*)?\})[?+]?")


def _first_unit(form: bytes) -> tuple[bytes, bytes] | None:
    """The form's first atom that matches one byte (a literal byte, an escape, a class)
    and the quantifier after it (b"" when none); None when the form starts otherwise (a
    group, a look-around, an anchor)."""
    if form.startswith(b"\\x"):
        atom = form[:4]
    elif form.startswith(b"\\"):
        atom = form[:2]
    elif form.startswith(b"["):
        atom = form[: class_end(form, 0)]
    elif form[:1] and form[:1] not in b"()|^$.?*+{}":
        atom = form[:1]
    else:
        return None
    quantifier = _QUANTIFIER.match(form, len(atom))
    return atom, quantifier.group() if quantifier else b""


@functools.cache
def _bytes_of(atom: bytes) -> frozenset[int]:
    return frozenset(b for b in range(256) if re.fullmatch(atom, bytes([b])))


def _class_of(members: frozenset[int]) -> bytes:
    return b"[" + b"".join(b"\\x%02x" % b for b in sorted(members)) + b"]"


def _trie(forms: list[bytes]) -> bytes:
    """The forms as one alternation with shared first units factored out, level by level:
    ``E  +\\S|ERROR \\S|ERROR: \\S`` becomes ``E(?:  +\\S|RROR(?: \\S|: \\S))``. The
    engine skips an alternative whose first byte or class does not match with one test,
    and enters a group only when the byte fits. The scan only asks whether a line
    matches, and factoring a common prefix out of an alternation does not change that."""
    groups: dict[bytes, list[bytes]] = {}
    out: list[bytes] = []
    for form in forms:
        unit = _first_unit(form)
        if unit is None:
            out.append(form)
            continue
        head = unit[0] + unit[1]
        if head not in groups:
            groups[head] = []
            out.append(head)
        groups[head].append(form[len(head) :])
    parts = []
    for item in out:
        tails = groups.get(item)
        if tails is None:
            parts.append(item)
        elif len(tails) == 1:
            parts.append(item + tails[0])
        else:
            parts.append(item + b"(?:" + _trie(tails) + b")")
    return b"|".join(parts)


def _literal_run(tail: bytes) -> bytes:
    """The literal bytes (each one byte, not repeated) a tail starts with."""
    run = b""
    while (unit := _first_unit(tail[len(run) :])) is not None:
        atom, quantifier = unit
        if quantifier or len(_bytes_of(atom)) != 1:
            break
        run += atom
    return run


def _dispatch(forms: list[bytes]) -> bytes:
    """The forms as one alternation that costs few byte tests on a line none matches.

    The first bytes are cut into buckets, the coarsest partition that keeps each byte
    class some form starts with whole (digits, a-f, g-z, A-Z, the other path bytes, the
    blanks): one class test picks the bucket, then a trie of what may follow. A form with
    a literal first byte in a bucket is checked there after its leading literal bytes
    matched, by a look-behind that holds the first byte (rare: only on a line that begins
    like it). First bytes in no class stay literal alternatives (one test each)."""
    split = [(_first_unit(f), f) for f in forms]
    classes = {
        _bytes_of(u[0]) for u, _ in split if u is not None and not u[1] and len(_bytes_of(u[0])) > 1
    }
    by_key: dict[tuple[bool, ...], set[int]] = {}
    for b in range(256):
        key = tuple(b in c for c in sorted(classes, key=sorted))
        if any(key):
            by_key.setdefault(key, set()).add(b)
    buckets = [frozenset(members) for members in by_key.values()]
    tails: dict[frozenset[int], list[bytes]] = {bucket: [] for bucket in buckets}
    literal: list[bytes] = []
    rest: list[bytes] = []
    for unit, form in split:
        if unit is None or unit[1]:
            rest.append(form)
            continue
        atom = unit[0]
        members = _bytes_of(atom)
        tail = form[len(atom) :]
        if len(members) > 1:
            for bucket in buckets:
                if bucket <= members:
                    tails[bucket].append(tail)
            continue
        home = next((bucket for bucket in buckets if members <= bucket), None)
        if home is None:
            literal.append(form)
            continue
        run = _literal_run(tail)
        tails[home].append(run + b"(?<=" + atom + run + b")" + tail[len(run) :])
    parts = [_class_of(b) + b"(?:" + _trie(tails[b]) + b")" for b in buckets if tails[b]]
    if literal:
        parts.append(_trie(literal))
    return b"|".join(parts + rest)


# The prefixes of ``log_line.PREFIX``, spelled out so that every step is one byte test:
# the clock after its first digit, the timestamp (and GitLab's stream after it) after its
# first digit, BuildKit's step and seconds, Jenkins' bracketed clock.
_CLOCK_TAIL_FAST: Final = (
    rb"[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][T ][0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
)
_TIMESTAMP_TAIL_FAST: Final = (
    _CLOCK_TAIL_FAST + rb"(?: |Z |[.,][0-9][0-9]*+Z? )(?:[0-9a-f][0-9a-f][EO] )?+"
)
_BUILDKIT_FAST: Final = rb"#[0-9][0-9]*+ [0-9][0-9]*+\.[0-9][0-9]*+ "
_JENKINS_FAST: Final = rb"\[[0-9]" + _CLOCK_TAIL_FAST + rb"(?:[.,][0-9][0-9]*+)?+Z?\] "
_DIGITS: Final = frozenset(b"0123456789")


def _combined(signatures: tuple[Signature, ...]) -> re.Pattern[bytes]:
    """One expression for the whole table: ``\\n``, then the signatures at the line's
    first byte, or after a timestamp. No capturing groups; the rare matching line is
    named afterwards by ``_classify``.

    The engine tries an expression's alternatives one after the other, so the cost of the
    scan is the number of tests a line that matches nothing goes through (measured
    against ``grep -c`` in bench/bench_evidence.py): ``_dispatch`` keeps it small.

    The table reads a timestamp as one whatever follows it (a line that has one is not
    tried again without it), and an optional timestamp before everything would cost a
    sub-match on every line. So only a line starting with a digit tries one: after the
    first digit the rest of a timestamp is taken possessively, and the byte before
    tells which case holds — a space (a timestamp was taken: the signatures follow) or
    the digit (none was: the forms that can start with a digit go on)."""
    plain = [f for s in signatures if not s.located for f in _forms(s.pattern)]
    located = (
        _PATH
        + b"(?:"
        + _trie([f for s in signatures if s.located for f in _forms(s.pattern)])
        + b")"
    )
    after_timestamp = _dispatch([*plain, located])
    # BuildKit's and Jenkins' prefixes start with '#' or '[' and a digit, which no
    # signature does: a line that has one can match only after it, as the table reads.
    prefixed = [p + b"(?:" + after_timestamp + b")" for p in (_BUILDKIT_FAST, _JENKINS_FAST)]
    # Each form that can start with a digit is cut in two: its digit-first part goes on
    # after the first digit, the rest stays in the dispatch.
    not_digit: list[bytes] = [*prefixed]
    after_digit: list[bytes] = []
    for form in [*plain, located]:
        unit = _first_unit(form)
        if unit is not None and unit[1] and _bytes_of(unit[0]) & _DIGITS:
            # It would be tried again on a timestamped line from its first byte.
            raise ValueError(f"a form may not start with a repeated digit class: {form!r}")
        members = _bytes_of(unit[0]) if unit is not None else frozenset()
        if unit is None or not members & _DIGITS:
            not_digit.append(form)
            continue
        tail = form[len(unit[0]) :]
        if not _DIGITS <= members:
            tail = b"(?<=" + unit[0] + b")" + tail
        after_digit.append(tail)
        if members - _DIGITS:
            not_digit.append(_class_of(members - _DIGITS) + form[len(unit[0]) :])
    digit_first = (
        b"[0-9](?:" + _TIMESTAMP_TAIL_FAST + b")?+"
        b"(?:(?<= )(?:" + after_timestamp + b")|(?<=[0-9])(?:" + _trie(after_digit) + b"))"
    )
    return re.compile(rb"\n(?:" + _dispatch([*not_digit, digit_first]) + b")")


_COMBINED: Final = _combined(SIGNATURES)
_EACH: Final = tuple(
    (
        s,
        re.compile(
            b"(?>" + _PREFIX + b")" + (_PATH if s.located else b"") + b"(?:" + s.pattern + b")"
        ),
    )
    for s in _ordered(SIGNATURES)
)


def _line_forms(signatures: tuple[Signature, ...]) -> list[bytes]:
    """Each signature as a wide form of the whole line after the timestamp, for RE2."""
    path = widened(_PATH)
    return [
        s.prefilter
        if s.prefilter is not None
        else (path if s.located else b"") + b"(?:" + widened(s.pattern) + b")"
        for s in signatures
    ]


# The timestamp is optional before every form: RE2 tries both readings at no cost.
_PREFILTER: Final = prefilter_for(
    [widened(_PREFIX) + b"(?:" + b"|".join(_line_forms(SIGNATURES)) + b")"]
)
# A line the pre-pass lets through and the exact expression turns away costs a round
# trip through Python. Past this many in one chunk (a log made of near misses), the rest
# of the chunk is left to ``re`` alone: never much slower than without the pre-pass.
MAX_NEAR_MISSES_PER_CHUNK: Final = 256


def _line_starts(
    buf: bytes | bytearray, pos: int, end: int, prefilter: Prefilter | None
) -> Iterator[int]:
    """The starts of the lines in ``buf[pos:end]`` the joined expression matches, in
    order (each line must follow a newline). The pre-pass, when given, only says where to
    look: every line it finds is checked with the exact expression."""
    if prefilter is not None:
        near_misses = 0
        exact = _COMBINED.match
        while (found := prefilter.search(buf, pos, end)) is not None:
            newline = found.start()
            pos = newline + 1
            if exact(buf, newline, end):
                yield pos
                continue
            near_misses += 1
            if near_misses > MAX_NEAR_MISSES_PER_CHUNK:
                break
        else:
            return
    search = _COMBINED.search
    while (match := search(buf, pos, end)) is not None:
        pos = match.start() + 1
        yield pos


def _classify(buf: bytes | bytearray, line_start: int, end: int) -> Signature:
    """Which signature the joined expression matched at ``line_start``."""
    for signature, pattern in _EACH:
        if pattern.match(buf, line_start, end):
            return signature
    raise AssertionError("the joined expression matched no signature")  # pragma: no cover


@dataclass(frozen=True)
class Hit:
    """A line a signature matched: its number (1 = the first line of the scanned window),
    the file offset of its first byte, and the signature; its template
    (``reading.templates``) and how many lines of the window matched with the same one
    (the first of them is the hit)."""

    line: int
    offset: int
    signature: Signature
    template: bytes = b""
    count: int = 1
    text: bytes = b""  # the line (cut), as a reader sees it, after the log's prefix
    score: float = 0.0
    # The log level the log's own prefix gave the line (``ERROR``, ``INFO``), if any.
    level: bytes | None = None


@dataclass(frozen=True)
class Scan:
    hits: tuple[Hit, ...]
    size: int
    window_start: int
    # The log's own prefixes (``reading.prefix``), one per shape its sections share.
    prefixes: tuple[learned.Prefix, ...] = ()


# Read at the window's start to learn the log's prefix from.
PREFIX_SAMPLE_BYTES: Final = 64 * 1024


def _window_prefix(f: io.BufferedReader, first: int, end: int) -> tuple[learned.Prefix, ...]:
    """The log's prefixes (``reading.prefix``), learned from lines at the start, the
    middle and the end of the window as a reader sees them (without a known CI prefix),
    each sample on its own (``prefix.common_prefixes``): a log's sections often have
    their own shapes."""
    samples = []
    size = end - first
    for at in sorted({first, first + size // 2, max(first, end - PREFIX_SAMPLE_BYTES // 3)}):
        f.seek(at)
        data = f.read(min(PREFIX_SAMPLE_BYTES // 3, end - at))
        if at > first:
            data = data[data.find(b"\n") + 1 :]  # the first line is cut
        samples.append(learned_prefix_of(data))
    return learned.common_prefixes(samples)


def learned_prefix_of(data: bytes) -> learned.Prefix | None:
    """The prefix the lines of ``data`` share: its last, cut, line left out."""
    text = log_line.without_columns(plain_bytes(data))
    lines = text.split(b"\n")[:-1] if b"\n" in text else []
    return learned.learn_prefix([_line_of(line, 0, len(line)) for line in lines])


def _named(message: bytes) -> Signature:
    """The signature a line's text after the log's prefix matches, or ``WORDS``."""
    for signature, pattern in _EACH:
        if pattern.match(message + b"\n"):
            return signature
    return WORDS


def _new_line_start(f: io.BufferedReader, start: int, end: int) -> int:
    """The offset of the first full line at or after ``start`` (a cut first line is not
    evidence), or ``end`` when there is none within reach."""
    f.seek(start - 1)
    reach = min(end, start - 1 + MAX_LINE_BYTES)
    data = f.read(reach - (start - 1))
    newline = data.find(b"\n")
    return start - 1 + newline + 1 if newline >= 0 else end


def scan_hits(
    path: Path,
    window_bytes: int,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    prefilter: Prefilter | None = _PREFILTER,
    words: bool = False,
) -> Scan:
    """Every signature hit in the last ``window_bytes`` of ``path``, one per (signature,
    template) with its count, and, with ``words``, the lines holding error words in the
    window's last ``ranking.VOCABULARY_WINDOW_BYTES``; read in chunks into one reused
    buffer. Raises OSError for a file that cannot be read. ``prefilter`` (RE2, where
    installed) only makes it faster: None gives the same signature hits with ``re``
    alone."""
    seen = path.stat()
    if not stat.S_ISREG(seen.st_mode):
        raise IsADirectoryError(f"not a regular file: {path.name}")
    # One failure is read by its class, its bundle and the playbook's view: the same file,
    # unchanged, is scanned once. A file's time has the grain of the kernel's clock, so
    # the key also holds a digest of its ends (a log changes at its end; a small one is
    # digested whole).
    key = (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, _ends_digest(path))
    return _scan_once(key, path, window_bytes, chunk_bytes, prefilter, words)


_DIGESTED_END_BYTES: Final = 64 * 1024


def _ends_digest(path: Path) -> bytes:
    with path.open("rb") as f:
        head = f.read(_DIGESTED_END_BYTES)
        size = f.seek(0, io.SEEK_END)
        f.seek(max(len(head), size - _DIGESTED_END_BYTES))
        tail = f.read(_DIGESTED_END_BYTES)
    return hashlib.blake2b(head + b"\0" + tail, digest_size=16).digest()


def forget_scans() -> None:
    """Drop the scans kept (a benchmark times the scan itself)."""
    _scan_once.cache_clear()


@functools.lru_cache(maxsize=8)
def _scan_once(
    key: tuple[int, int, int, int, bytes],
    path: Path,
    window_bytes: int,
    chunk_bytes: int,
    prefilter: Prefilter | None,
    words: bool,
) -> Scan:
    with path.open("rb") as raw:
        f = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
        size = f.seek(0, io.SEEK_END)
        window_start = max(0, size - window_bytes)
        first = _new_line_start(f, window_start, size) if window_start > 0 else 0
        f.seek(first)
        search, reach = ranking.vocabulary()
        words_from = max(first, size - reach) if words else None
        log_prefixes = _window_prefix(f, first, size) if words else ()
        f.seek(first)
        hits = _scan(f, first, size, chunk_bytes, prefilter, search, words_from, log_prefixes)  # type: ignore[arg-type]
        return Scan(hits, size, window_start, log_prefixes)


class _LineCounter:
    """Line numbers by file offset, counted only as far as the last hit asked for: the
    newlines after the last hit are never counted (counting them all costs as much as a
    fifth of the scan). The bytes between the buffer and the last counted offset, gone
    from the buffer, are read again from the file."""

    def __init__(self, fd: int, first: int) -> None:
        self._fd = fd
        self._offset = first  # counted up to here (file offset)
        self._line = 1  # the number of the line the byte at ``_offset`` belongs to

    def line_at(self, offset: int, buf: bytearray, buf_offset: int) -> int:
        """The number of the line starting at ``offset``; ``buf[0]`` holds the byte at
        ``buf_offset`` (or a placeholder that is not a newline)."""
        while self._offset < buf_offset:
            block = os.pread(self._fd, min(CHUNK_BYTES, buf_offset - self._offset), self._offset)
            if not block:
                break  # the file shrank under us: count what is in the buffer
            self._line += block.count(b"\n")
            self._offset += len(block)
        self._line += buf.count(b"\n", self._offset - buf_offset, offset - buf_offset)
        self._offset = offset
        return self._line


def _drawn(buf: bytearray, filled: int) -> bool:
    """Whether ``buf[:filled]`` holds an escape sequence, a redrawn line (a carriage
    return that does not end a CRLF line break) or gh's job and step columns: three
    ``memchr`` on a plain chunk."""
    if buf.find(b"\x1b", 0, filled) >= 0:
        return True
    if buf.find(b"\r", 0, filled) >= 0 and BARE_CR_BYTES.search(buf, 0, filled) is not None:
        return True
    return log_line.has_columns(buf, 0, filled)


class _Plain:
    """A chunk as a reader sees it (``terminal.plain_bytes``, and without gh's job and
    step columns: the tool's line starts after them), and the way back from a line's start
    there to the same line's start in the chunk: what is removed (escape sequences, stale
    frames, columns) holds no newline, so the n-th line of one is the n-th line of the
    other. Asked in ascending order (as the matches come), each newline is stepped over
    once."""

    def __init__(self, buf: bytearray, filled: int) -> None:
        self.text = log_line.without_columns(plain_bytes(bytes(buf[:filled])))
        self._buf = buf
        self._at_text = 0
        self._at_chunk = 0

    def line_start_in_chunk(self, pos: int) -> int:
        newlines = self.text.count(b"\n", self._at_text, pos)
        at = self._at_chunk
        for _ in range(newlines):
            at = self._buf.find(b"\n", at) + 1
        self._at_text, self._at_chunk = pos, at
        return at


def _line_of(text: bytes | bytearray, pos: int, end: int) -> bytes:
    """The line starting at ``pos`` (as much of it as a template reads), without its CI
    prefix: what its template is taken of, and what it is ranked by."""
    reach = min(end, pos + templates.MAX_LINE_BYTES)
    stop = text.find(b"\n", pos, reach)
    line = bytes(text[pos : stop if stop >= 0 else reach])
    prefix = _PREFIX_ONLY.match(line)
    return line[prefix.end() :] if prefix else line


def _word_line_starts(
    text: bytes | bytearray, pos: int, end: int, words: WordSearch
) -> Iterator[int]:
    """The starts of the lines in ``text[pos:end]`` that hold an error word, in order."""
    while (found := words.search(text, pos, end)) is not None:
        yield text.rfind(b"\n", 0, found.start()) + 1
        newline = text.find(b"\n", found.start(), end)
        if newline < 0:
            return
        pos = newline + 1


def _merged(a: Iterator[int], b: Iterator[int]) -> Iterator[tuple[int, bool]]:
    """Two ascending streams of line starts as one, each start once: (start, whether a
    signature matched it)."""
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x <= y):
            assert x is not None
            yield x, True
            if y == x:
                y = next(b, None)
            x = next(a, None)
        else:
            yield y, False
            y = next(b, None)


def _scan(
    f: io.BufferedReader,
    first: int,
    end: int,
    chunk_bytes: int,
    prefilter: Prefilter | None,
    words: WordSearch | None = None,
    words_from: int | None = None,
    prefixes: tuple[learned.Prefix, ...] = (),
) -> tuple[Hit, ...]:
    """Every distinct (signature, template) hit of the window, the first line of each
    with how many lines matched alike; lines holding error words (``words``) are read
    from file offset ``words_from`` on. A line that starts with one of ``prefixes``, the
    log's own (``reading.prefix``): a line holding error words is named by the
    signature its text after them matches, and ranked by that text."""
    classified = 0
    found: dict[tuple[str, bytes], list] = {}
    lines = _LineCounter(f.fileno(), first)
    buf = bytearray(chunk_bytes + MAX_LINE_BYTES + 2)
    view = memoryview(buf)
    # buf[0] is the newline that ends the line before the window's first line: every line
    # in the buffer is then preceded by a newline, as the joined pattern requires.
    buf[0] = 0x0A
    filled = 1
    buf_offset = first - 1  # file offset of buf[0]
    remaining = end - first

    def done() -> tuple[Hit, ...]:
        return tuple(
            Hit(line, offset, signature, template, count, text, 0.0, level)
            for line, offset, signature, template, count, text, level in found.values()
        )

    while True:
        want = min(chunk_bytes, remaining)
        got = f.readinto(view[filled : filled + want]) if want else 0
        remaining -= got
        filled += got
        at_end = remaining <= 0 or got == 0
        if at_end and buf[filled - 1] != 0x0A:
            # The last line ends at the end of the file as if it had its newline (a
            # signature may look ahead for the end of the line).
            buf[filled] = 0x0A
            filled += 1
        last_newline = filled if at_end else buf.rfind(b"\n", 0, filled)
        # Matched as a reader sees it: a chunk with colours, redrawn lines or gh columns is
        # matched in its plain form, each line found there is then placed in the chunk itself.
        seen = _Plain(buf, filled) if _drawn(buf, filled) else None
        text, text_end = (seen.text, len(seen.text)) if seen is not None else (buf, filled)
        text_last_newline = last_newline
        if seen is not None and not at_end:
            text_last_newline = seen.text.rfind(b"\n")
        starts: Iterator[tuple[int, bool]] = (
            (pos, True) for pos in _line_starts(text, 0, text_end, prefilter)
        )
        if words is not None and words_from is not None and buf_offset + filled > words_from:
            starts = _merged(
                _line_starts(text, 0, text_end, prefilter),
                _word_line_starts(text, 1, text_end, words),
            )
        # A match may take in the newline that starts the next line: each search starts
        # right after the last match's own newline.
        for pos, signed in starts:
            if pos > text_last_newline:
                break  # its line continues in the next chunk: seen again there
            classified += 1
            if classified > MAX_MATCHES:
                return done()  # a storm: what we have is the start of it
            line = _line_of(text, pos, text_end)
            if not signed and not line.strip():
                continue
            signature = _classify(text, pos, text_end) if signed else WORDS
            key = (signature.name, template_of(line))
            known = found.get(key)
            if known is not None:
                known[4] += 1
                continue
            if len(found) >= MAX_DISTINCT:
                continue
            head, message = learned.split_prefix(line, prefixes)
            if not signed and head:
                signature = _named(message)
            offset = buf_offset + (seen.line_start_in_chunk(pos) if seen is not None else pos)
            found[key] = [
                lines.line_at(offset, buf, buf_offset),
                offset,
                signature,
                key[1],
                1,
                message,
                learned.level_of(head) if head else None,
            ]
        if at_end:
            return done()
        if 0 <= last_newline and filled - last_newline <= MAX_LINE_BYTES:
            # Carry the unfinished last line, with the newline before it.
            carry = filled - last_newline
            buf[:carry] = buf[last_newline:filled]
            buf_offset += last_newline
            filled = carry
        else:
            # The unfinished line is too long to be evidence: keep none of it (its start
            # is never seen, the lines after it are). A placeholder byte that is not a
            # newline stands for its last byte, so no line start is invented.
            buf_offset += filled - 1
            buf[0:1] = b"\x00"
            filled = 1


# ---- excerpts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceExcerpt:
    """Lines ``first_line``..``last_line`` of the scanned window, redacted, each shown with
    its number; ``signatures`` names what matched in it, most telling first."""

    first_line: int
    last_line: int
    signatures: tuple[str, ...]
    rank: int
    text: str
    # Its matched lines alone: the lines around them are in the log's tail, sent too.
    bare: bool = False
    score: float = 0.0
    # Why its best line ranks where it does (``ranking.reasons``).
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    excerpts: tuple[EvidenceExcerpt, ...]
    size: int
    window_start: int
    hits: int
    note: str | None = None
    # A cause stated outright is among the excerpts (``ranking.CONFIDENT_SCORE``): the
    # log's tail may then be cut to its last words.
    confident: bool = False


@dataclass
class _Group:
    first: int
    last: int
    hits: list[Hit]


def _groups(hits: tuple[Hit, ...], max_excerpts: int, context: int) -> list[_Group]:
    """The best hits (score, then first seen) with their context ranges, merged where
    they overlap or touch; at most ``max_excerpts`` groups."""
    groups: list[_Group] = []
    for hit in sorted(hits, key=lambda h: (-h.score, h.line)):
        lo, hi = max(1, hit.line - context), hit.line + context
        joined = next((g for g in groups if lo <= g.last + 1 and hi >= g.first - 1), None)
        if joined is not None:
            first, last = min(joined.first, lo), max(joined.last, hi)
            if last - first + 1 <= MAX_EXCERPT_LINES:
                joined.first, joined.last = first, last
                joined.hits.append(hit)
            elif joined.first <= hit.line <= joined.last:
                joined.hits.append(hit)  # shown already: marked, the excerpt not grown
            # else: a lesser line next to a full excerpt (a block of alike lines)
            continue
        if len(groups) >= max_excerpts:
            continue
        groups.append(_Group(lo, hi, [hit]))
    # A group that grew may now touch another: merge until stable (few groups).
    merged = True
    while merged:
        merged = False
        for a in groups:
            for b in groups:
                if (
                    a is not b
                    and a.first <= b.last + 1
                    and b.first <= a.last + 1
                    and max(a.last, b.last) - min(a.first, b.first) < MAX_EXCERPT_LINES
                ):
                    a.first, a.last = min(a.first, b.first), max(a.last, b.last)
                    a.hits.extend(b.hits)
                    groups.remove(b)
                    merged = True
                    break
            if merged:
                break
    return groups


# In a long line, where a failure is stated: a word that says so, then a colon (a tool's
# JSON report holds the failing command's stderr in one line: ansible's ``fatal: …
# "stderr": "… rmtree failed: [Errno 30] Read-only file system …"``).
_STATED_IN_LINE: Final = re.compile(
    rb"(?i)\b(?:error|errno|exception|fail(?:ed|ure)?|fatal|denied|refused|panic)\b[^\s:]{0,12}:"
)
# What of a long line is shown: its start, and the window around the last place it states
# a failure past that start.
_HEAD_SHOWN_BYTES: Final = 240
_BEFORE_STATED_BYTES: Final = 120
_AFTER_STATED_BYTES: Final = 280


def _clip(line: bytes) -> bytes:
    if len(line) <= MAX_SHOWN_LINE_BYTES:
        return line
    cut = "…".encode()
    last = None
    for stated in _STATED_IN_LINE.finditer(line, _HEAD_SHOWN_BYTES):
        last = stated
    if last is None:
        return line[:MAX_SHOWN_LINE_BYTES] + cut
    start = max(_HEAD_SHOWN_BYTES, last.start() - _BEFORE_STATED_BYTES)
    end = last.start() + _AFTER_STATED_BYTES
    return line[:_HEAD_SHOWN_BYTES] + cut + line[start:end] + (cut if end < len(line) else b"")


def _read_group(f: io.BufferedReader, group: _Group, end: int) -> tuple[int, list[bytes], int]:
    """(number of the first line returned, the lines, the first line's byte offset)
    around ``group``'s hits."""
    anchor = min(group.hits, key=lambda h: h.line)
    lowest = max(group.hits, key=lambda h: h.line)
    start = max(0, anchor.offset - _READ_AROUND_BYTES)
    stop = min(end, lowest.offset + _READ_AROUND_BYTES)
    f.seek(start)
    data = f.read(stop - start)
    # Lines before the anchor, counted backwards from its line start.
    head = data[: anchor.offset - start]
    before_lines = head.split(b"\n")[:-1] if head.endswith(b"\n") else []
    if start > 0 and before_lines:
        before_lines = before_lines[1:]  # the first may be cut
    want_before = anchor.line - group.first
    shown_before = before_lines[-want_before:] if want_before else []
    after = data[anchor.offset - start :].split(b"\n")
    if stop < end and len(after) > 1:
        after = after[:-1]  # the last may be cut
    elif stop == end and after and not after[-1]:
        after = after[:-1]  # the file's final newline ends a line, it starts none
    want_after = group.last - anchor.line + 1
    lines = [line.rstrip(b"\r") for line in shown_before + after[:want_after]]
    first_offset = anchor.offset - sum(len(line) + 1 for line in shown_before)
    return anchor.line - len(shown_before), lines, first_offset


def _render_group(numbered: list[tuple[int, bytes]], marked: set[int]) -> str:
    raw = log_line.without_columns(plain_bytes(b"\n".join(line for _, line in numbered)))
    redacted = redact_bytes(raw).split("\n")
    if len(redacted) != len(numbered):
        # A secret spanning lines was redacted: the numbering no longer lines up per line.
        return "\n".join(f"     | {text}" for text in redacted)
    width = len(str(numbered[-1][0] + 1))
    out = []
    for (number, _), text in zip(numbered, redacted, strict=True):
        mark = ">" if number in marked else " "
        clipped = _clip(text.encode("utf-8", errors="replace")).decode("utf-8", "ignore")
        out.append(f"{mark}{number:>{width}}| {clipped}")
    return "\n".join(out)


def extract_evidence(
    path: Path,
    *,
    window_bytes: int,
    max_bytes: int,
    max_excerpts: int = MAX_EXCERPTS,
    context_lines: int = CONTEXT_LINES,
    chunk_bytes: int = CHUNK_BYTES,
    tail_from: int | None = None,
    known: Callable[[bytes], bool] | None = None,
) -> Evidence:
    """The root-cause excerpts of the log at ``path``: most telling first, each with its
    line numbers, at most ``max_excerpts`` of them and ``max_bytes`` in all (rendered).
    ``tail_from``: the byte offset from which the log is sent whole beside the evidence
    (its tail); an excerpt that lies there shows its matched lines alone, as pointers,
    rather than send its context twice. ``known``: whether a green run of the same check
    printed a template (a baseline); None when there is none. Raises OSError for an
    unreadable file."""
    scan = scan_hits(path, window_bytes, chunk_bytes=chunk_bytes, words=True)
    # A level is told apart only in a log that uses several: one that logs everything at
    # DEBUG (mock) says nothing by it.
    levelled = any(hit.level in _ERROR_LEVELS for hit in scan.hits)
    scored = tuple(
        replace(
            hit,
            score=ranking.score(
                hit.signature.rank,
                hit.text,
                count=hit.count,
                known=known(hit.template) if known is not None else None,
                words_only=hit.signature is WORDS,
                level=hit.level if levelled else None,
            ),
        )
        for hit in scan.hits
    )
    # A line worth nothing (a tally of no errors, a line every green run prints) is not
    # evidence at all.
    groups = _groups(tuple(h for h in scored if h.score > 0), max_excerpts, context_lines)
    excerpts: list[EvidenceExcerpt] = []
    with path.open("rb") as raw:
        f = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
        for group in groups:
            first_line, lines, first_offset = _read_group(f, group, scan.size)
            marked = {h.line for h in group.hits}
            numbered = list(enumerate(lines, start=first_line))
            bare = tail_from is not None and first_offset >= tail_from
            if bare:
                numbered = [(n, line) for n, line in numbered if n in marked]
            ranked = sorted(group.hits, key=lambda h: (-h.score, h.line))
            names = tuple(dict.fromkeys(h.signature.name for h in ranked))
            best = ranked[0]
            why = ranking.reasons(
                best.text,
                count=best.count,
                known=known(best.template) if known is not None else None,
                words_only=best.signature is WORDS,
            )
            excerpts.append(
                EvidenceExcerpt(
                    first_line=numbered[0][0],
                    last_line=numbered[-1][0],
                    signatures=names,
                    rank=ranked[0].signature.rank,
                    text=_render_group(numbered, marked),
                    bare=bare,
                    score=ranked[0].score,
                    reasons=why,
                )
            )
    excerpts.sort(key=lambda e: (-e.score, e.first_line))
    kept, used = [], 0
    for excerpt in excerpts:
        cost = len(_excerpt_block(excerpt).encode())
        if used + cost > max_bytes:
            continue
        kept.append(excerpt)
        used += cost
    note = None
    if scan.window_start > 0:
        note = (
            f"scanned the last {_mib(scan.size - scan.window_start)} of {_mib(scan.size)}; "
            "line numbers count from the first full line of that window"
        )
    confident = any(e.score >= ranking.CONFIDENT_SCORE for e in kept)
    return Evidence(tuple(kept), scan.size, scan.window_start, len(scan.hits), note, confident)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _excerpt_block(excerpt: EvidenceExcerpt) -> str:
    span = (
        f"line {excerpt.first_line}"
        if excerpt.first_line == excerpt.last_line
        else f"lines {excerpt.first_line}-{excerpt.last_line}"
    )
    why = f"; {', '.join(excerpt.reasons)}" if excerpt.reasons else ""
    where = "; around it: the log's tail" if excerpt.bare else ""
    return f"--- {span} ({', '.join(excerpt.signatures)}{why}{where}) ---\n{excerpt.text}\n"


def render_evidence(evidence: Evidence) -> str:
    """The excerpts as the bundle shows them: a header per excerpt naming its lines and
    what matched, matched lines marked with ``>``."""
    return "".join(_excerpt_block(e) for e in evidence.excerpts)
