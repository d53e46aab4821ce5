"""The evidence extractor: the signature table, the streamed scan (the same hits whatever
the chunk size), excerpts (context, merging, order, byte budget, redaction), the bundle's
use of it (sent once, old bundles still load and render the same) and its config key."""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.domain import line_templates, log_line
from orchestrator.domain.config import ContextLimits, load_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.line_templates import template_of
from orchestrator.domain.log_line import without_columns
from orchestrator.domain.terminal import plain_bytes
from orchestrator.reading import ranking
from orchestrator.reading.evidence import extract_evidence, render_evidence
from orchestrator.reading.prefilter import Prefilter
from orchestrator.reading.scan import MAX_LINE_BYTES, scan_hits
from orchestrator.reading.signature_match import MAX_NEAR_MISSES_PER_CHUNK, re2_prefilter
from orchestrator.reading.signatures import SIGNATURES, WORDS
from orchestrator.recovery.context import BundleInputs, ContextBundle, build_bundle

from conftest import examples

# Every scan test runs twice: with the RE2 pre-pass (installed with the project) and with
# ``re`` alone (a platform without the wheel). The hits must be the same.
_PREFILTER = re2_prefilter()
PASSES = [pytest.param(_PREFILTER, id="re2-prepass"), pytest.param(None, id="re-alone")]


needs_re2 = pytest.mark.skipif(
    _PREFILTER is None, reason="google-re2 is not installed on this platform: no pre-pass"
)

# Where pyproject.toml installs google-re2 (the platforms it ships wheels for).
RE2_PLATFORMS = {("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("win32", "AMD64")}


def test_the_re2_prepass_is_installed_where_declared() -> None:
    # Without it every scan would silently be 4x slower.
    if (sys.platform, platform.machine()) not in RE2_PLATFORMS:
        pytest.skip(f"google-re2 is not declared for {sys.platform}/{platform.machine()}")
    assert _PREFILTER is not None


DATA = Path(__file__).parent / "data"

# One line per tool family, as the tool prints it, and the signature that must name it.
SAMPLES = [
    ("E       assert 3 == 2", "pytest-assertion"),
    ("FAILED tests/test_deal.py::test_deal - assert 3 == 2", "pytest-failed"),
    ("ERROR tests/test_deal.py - ModuleNotFoundError: No module named 'x'", "pytest-error"),
    ("FAIL: test_sum (test_u.T.test_sum)", "unittest-failure"),
    ("ERROR: test_load (test_u.T.test_load)", "unittest-error"),
    ("FAILED (failures=1)", "unittest-summary"),
    ("ValueError: invalid literal for int() with base 10: 'x'", "python-exception"),
    ("requests.exceptions.ConnectionError", "python-exception"),
    ("deal.py:1:8: F401 [*] `os` imported but unused", "lint-code"),
    (
        '{"file": "typed.py", "line": 2, "column": 11, "message": "Incompatible return", '
        '"hint": null, "code": "return-value", "severity": "error"}',
        "json-diagnostic",
    ),
    ("./deal.py:3:1: E302 expected 2 blank lines, found 1", "lint-code"),
    ("deal.py:1: error: Incompatible types in assignment", "located-error"),
    ("src/deal.ts(3,5): error TS2322: Type 'string' is not assignable", "tsc-error"),
    ("src/deal.ts:3:5 - error TS2322: Type 'string' is not assignable", "tsc-error"),
    ("  3:5  error  'x' is not defined  no-undef", "eslint-error"),
    ("FAIL src/deal.test.js", "jest-fail"),
    ("  \u25cf deal \u203a adds one", "jest-test"),
    ("--- FAIL: TestDeal (0.00s)", "go-test-fail"),
    ("FAIL\texample.com/deal\t0.003s", "go-package-fail"),
    ("./deal.go:5:2: undefined: thing", "located-message"),
    ("panic: runtime error: index out of range [3] with length 3", "go-panic"),
    ("error[E0308]: mismatched types", "rustc-error"),
    ('error: could not compile `deal` (bin "deal") due to 1 previous error', "error-line"),
    ("thread 'tests::deal' panicked at src/lib.rs:9:5:", "rust-panic"),
    ("test tests::deal ... FAILED", "cargo-test-failed"),
    ("test result: FAILED. 0 passed; 1 failed", "cargo-test-result"),
    ("deal.c:1:25: error: 'thing' undeclared", "located-error"),
    ("make: *** [Makefile:2: deal] Error 1", "make-error"),
    ("FAILURE: Build failed with an exception.", "gradle-failure"),
    ("make[1]: *** [sub] Error 2", "make-error"),
    ("/usr/bin/ld: error: undefined symbol: thing", "linker-error"),
    ("collect2: error: ld returned 1 exit status", "linker-error"),
    ("[ERROR] Failed to execute goal org.apache.maven.plugins", "maven-error"),
    ("* What went wrong:", "gradle-what-went-wrong"),
    ("BUILD FAILURE", "build-failure"),
    ('Exception in thread "main" java.lang.NullPointerException', "java-exception"),
    ("Caused by: java.io.IOException: boom", "java-caused-by"),
    ("Deal.java:1: error: incompatible types", "located-error"),
    ("ERROR: No matching distribution found for nope", "pip-no-distribution"),
    ("ERROR: Could not find a version that satisfies the requirement nope", "pip-no-distribution"),
    ("npm ERR! code E404", "npm-error"),
    ("npm error code E404", "npm-error"),
    ('error Couldn\'t find package "nope" on the "npm" registry.', "error-line"),
    ("CONFLICT (content): Merge conflict in deal.py", "git-conflict"),
    ("Automatic merge failed; fix conflicts and then commit the result.", "git-merge-failed"),
    ("fatal: not a git repository (or any of the parent directories): .git", "fatal"),
    # BuildKit's own line for a failed step (moby/buildkit#2221 quotes one).
    ("#63 ERROR: executor failed running [/bin/sh -c make]: exit code: 2", "docker-step-error"),
    ("ERROR: failed to solve: process did not complete successfully", "error-colon"),
    ("The command '/bin/sh -c make' returned a non-zero code: 2", "docker-returned"),
    ("F401 [*] `os` imported but unused", "ruff-code"),
    ("F821 Undefined name `undefined_thing`", "ruff-code"),
    ("1 file would be reformatted", "format-check"),
    ("would reformat deal.py", "format-check"),
    ("Failed example:", "doctest-failed-example"),
    (
        "============================ no tests ran in 1.54s =============================",
        "pytest-no-tests",
    ),
    ("bash: line 1: 22040 Killed                  python load.py", "shell-error"),
    ("bash: line 1: eslint-absent-xyz: command not found", "shell-error"),
    ("bash: line 1:  7155 Killed                  python load.py", "shell-error"),
    ('ac1c629 "fix: off-by-one in core": touches both production code and tests', "commit-order"),
    ("UserWarning: config key `retries` is unused", "python-exception"),
    ("dd: error writing '/dev/full': No space left on device", "program-error"),
    ("cp: cannot create regular file 'out/deal.bin': Disk quota exceeded", "program-error"),
    ("/usr/bin/tar: deal.tar: Cannot open: Permission denied", "program-error"),
    ("mypy: error: Cannot find implementation or library stub", "program-error"),
    ("::failure-class::rate_limited", "failure-class"),
    (
        "::error title=ruff (F401),file=/w/pkg/mod.py,line=1,col=8::pkg/mod.py:1:8: F401 x",
        "gha-error-annotation",
    ),
    ("::error::Process completed with exit code 1.", "gha-error-annotation"),
    ('{"type": "error", "message": "unexpected status 401 Unauthorized"}', "engine-error-event"),
    ('{"type":"turn.failed","error":{"message":"429 Too Many Requests"}}', "engine-error-event"),
    (
        '{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":2}',
        "engine-error-event",
    ),
    ("# orchestrator: exit 124 after 1.513s (timed out)", "runner-ended"),
    ("# orchestrator: exit 127 after 0.028s (executable not found: nope)", "runner-ended"),
    # A CI runner's timestamp before the line does not hide it, nor docker BuildKit's
    # step and seconds (a test run inside ``docker build``), nor Jenkins' timestamp.
    ("2026-12-01T02:53:12.1234567Z E       assert 3 == 2", "pytest-assertion"),
    ("#8 1.234 E       assert 3 == 2", "pytest-assertion"),
    ("#12 0.512 ERROR: No matching distribution found for dael", "pip-no-distribution"),
    ("#8 1.234 ERROR: process failed", "error-colon"),  # the step's own output
    ("[2026-12-01T02:53:12.123Z] FAILED tests/test_deal.py::test_deal - x", "pytest-failed"),
    ("[2026-12-01T02:53:12Z] src/deal.py:3: error: Incompatible types", "located-error"),
    # GitLab's runner: its timestamp, then the stream's number and O (stdout) or E.
    ("2026-12-01T02:53:12.123456Z 00O E       assert 3 == 2", "pytest-assertion"),
    ("2026-12-01T02:53:12.123456Z 01E src/deal.py:3: error: Incompatible", "located-error"),
    # gh run view --log: the job's and the step's names before the timestamp.
    ("test\tRun pytest\t2026-12-01T02:53:12.1234567Z E       assert 3 == 2", "pytest-assertion"),
    ("lint / ruff\tRun ruff\t\ufeff2026-12-01T02:53:12Z app.py:1:8: F401 [*] `os` x", "lint-code"),
]
ORDINARY = [
    "collected 12 items",
    "tests/test_deal.py::test_deal PASSED                     [ 50%]",
    "  Downloading deal-1.0-py3-none-any.whl (12 kB)",
    "gcc -O2 -c -o deal.o deal.c",
    "ok  \texample.com/deal\t0.003s",
    '{"file": "typed.py", "line": 2, "message": "unused ignore", "severity": "note"}',
    "test result: ok. 3 passed; 0 failed",
    "Compiling deal v0.1.0",
    "2026-12-01 02:53:12 INFO errors: 0",
    "no errors found; ERRORS=0",
    "# orchestrator: exit 0 after 0.210s",
    '{"type":"result","subtype":"success","is_error":false,"num_turns":3}',
    '{"type": "turn.completed"}',
]


def write_log(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("prefilter", PASSES)
@pytest.mark.parametrize(("line", "name"), SAMPLES, ids=[name for _, name in SAMPLES])
def test_each_tool_line_is_named_by_its_signature(
    tmp_path: Path, line: str, name: str, prefilter: Prefilter | None
) -> None:
    log = write_log(tmp_path / "log", "start\n" + line + "\nend\n")
    hits = scan_hits(log, 1 << 20, prefilter=prefilter, words=False).hits
    assert [(h.line, h.signature.name) for h in hits] == [(2, name)]


@pytest.mark.parametrize("prefilter", PASSES)
def test_ordinary_output_is_not_evidence(tmp_path: Path, prefilter: Prefilter | None) -> None:
    log = write_log(tmp_path / "log", "\n".join(ORDINARY * 100) + "\n")
    assert scan_hits(log, 1 << 20, prefilter=prefilter, words=False).hits == ()


def test_signature_names_are_unique() -> None:
    assert len({s.name for s in SIGNATURES}) == len(SIGNATURES)


def test_excerpts_have_context_line_numbers_and_merge(tmp_path: Path) -> None:
    lines = [f"ordinary {i}" for i in range(1, 101)]
    lines[49] = "E       assert 3 == 2"  # line 50
    lines[51] = "FAILED t.py::t - assert 3 == 2"  # line 52: overlaps line 50's context
    lines[89] = "CONFLICT (content): Merge conflict in deal.py"  # line 90
    log = write_log(tmp_path / "log", "\n".join(lines) + "\n")
    evidence = extract_evidence(log, window_bytes=1 << 20, max_bytes=8192)
    assert [(e.first_line, e.last_line) for e in evidence.excerpts] == [(47, 55), (87, 93)]
    first = evidence.excerpts[0]
    assert first.signatures == ("pytest-assertion", "pytest-failed")
    assert first.text.splitlines()[3] == ">50| E       assert 3 == 2"
    assert first.text.splitlines()[0] == " 47| ordinary 47"
    assert render_evidence(evidence).startswith(
        "--- lines 47-55 (pytest-assertion, pytest-failed) ---\n 47| ordinary 47\n"
    )


def test_the_most_telling_excerpt_comes_first(tmp_path: Path) -> None:
    lines = [f"ordinary {i}" for i in range(1, 201)]
    lines[9] = "make: *** [all] Error 1"  # rank 3, but first in the log
    lines[149] = "deal.py:1:8: F401 [*] `os` imported but unused"  # rank 0
    log = write_log(tmp_path / "log", "\n".join(lines) + "\n")
    evidence = extract_evidence(log, window_bytes=1 << 20, max_bytes=8192)
    assert [e.signatures for e in evidence.excerpts] == [("lint-code",), ("make-error",)]


def test_excerpts_stay_within_the_byte_budget_and_count(tmp_path: Path) -> None:
    lines = [f"ordinary {i}" for i in range(5000)]
    for i in range(10, 5000, 100):
        lines[i] = f"E       assert {i} == 0 " + "x" * 2000
    log = write_log(tmp_path / "log", "\n".join(lines) + "\n")
    evidence = extract_evidence(log, window_bytes=1 << 20, max_bytes=3000, max_excerpts=4)
    assert 1 <= len(evidence.excerpts) <= 4
    assert len(render_evidence(evidence).encode()) <= 3000
    # Long lines are shown cut.
    assert "…" in evidence.excerpts[0].text
    # One hit per shape, counted: a storm of alike lines does not grow the list.
    assert evidence.hits == 1
    (hit,) = scan_hits(log, 1 << 20, words=True).hits
    assert (hit.line, hit.count) == (11, 50)


def test_secrets_in_excerpts_are_redacted(tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    log = write_log(
        tmp_path / "log",
        f"ordinary\nexport GITHUB_TOKEN={token}\nE       assert fetch() == 200\nmore\n",
    )
    text = render_evidence(extract_evidence(log, window_bytes=1 << 20, max_bytes=8192))
    assert ">3| E       assert fetch() == 200" in text
    assert token not in text and "[REDACTED]" in text


def test_only_the_window_is_scanned_and_the_note_says_so(tmp_path: Path) -> None:
    head = "E       assert early\n" + "ordinary line here\n" * 1000
    tail = "partial line that the window cuts\n" + "E       assert late\n" + "tail\n" * 10
    log = write_log(tmp_path / "log", head + tail)
    window = len(tail.encode()) - 10  # cuts into the first tail line
    evidence = extract_evidence(log, window_bytes=window, max_bytes=8192)
    text = render_evidence(evidence)
    assert "assert late" in text and "assert early" not in text
    # Numbered from the first full line of the window.
    assert ">1| E       assert late" in text
    assert evidence.note is not None and "line numbers count from" in evidence.note


def test_an_unreadable_log_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        extract_evidence(tmp_path / "absent", window_bytes=1 << 20, max_bytes=1024)
    with pytest.raises(OSError):
        extract_evidence(tmp_path, window_bytes=1 << 20, max_bytes=1024)


# ---- streaming ------------------------------------------------------------------------

LINE_KINDS = st.sampled_from([line for line, _ in SAMPLES] + ORDINARY + ["", "\r", "x" * 300])


def reference_hits(data: bytes, *, words: bool = False) -> list[tuple[int, int, str]]:
    """The hits of a whole-file, line-by-line reading: what the streamed scan must equal.
    Each line is tried against each signature alone, plain ones first."""
    clock = rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?"
    # A CI timestamp (GitLab's with its stream after it), docker BuildKit's step and
    # seconds, a Jenkins timestamp: one at most.
    gitlab = rb"(?:[0-9a-f]{2}[EO] )?"
    timestamp = rb"(?:" + clock + rb" " + gitlab + rb"|#\d+ \d+\.\d+ |\[" + clock + rb"\] )?"
    # gh run view --log: two tab-ended columns (and a byte-order mark) before a clock.
    timestamp = rb"(?:[^\t\n]*\t[^\t\n]*\t(?:\xef\xbb\xbf)?(?=" + clock + rb" ))?" + timestamp
    path = rb"[\w./\\+@~-][\w./\\+@~-]*+"
    ordered = [s for s in SIGNATURES if not s.located] + [s for s in SIGNATURES if s.located]
    each = [
        (
            s,
            re.compile(
                b"(?>" + timestamp + b")" + (path if s.located else b"") + b"(?:" + s.pattern + b")"
            ),
        )
        for s in ordered
    ]
    # With ``words``, lines holding error words are hits too (the window's end: all of a
    # small log).
    vocabulary, _ = ranking.vocabulary()
    prefix = re.compile(log_line.PREFIX)
    found, seen_keys, offset = [], set(), 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines = lines[:-1]
    for number, line in enumerate(lines, start=1):
        # As a reader sees it, its line break included: "\r\r\n" is one CRLF break (a PTY's
        # onlcr over CRLF output), not a redraw of the line as empty, which the line cut
        # from its break would read as. The offset is the line's own.
        seen = plain_bytes(line + b"\n")[:-1]
        signature = next((s for s, rx in each if rx.match(seen + b"\n")), None)
        if signature is None and words and seen.strip() and vocabulary.search(seen, 0, len(seen)):
            signature = WORDS
        if signature is not None:
            shown = log_line.without_columns(seen)[: line_templates.MAX_LINE_BYTES]
            cut = prefix.match(shown)
            key = (signature.name, template_of(shown[cut.end() :] if cut else shown))
            if key not in seen_keys:  # one hit per shape: its first line
                seen_keys.add(key)
                found.append((number, offset, signature.name))
        offset += len(line) + 1
    return found


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    lines=st.lists(LINE_KINDS, max_size=60),
    chunk=st.integers(1, 700),
    final_newline=st.booleans(),
    prefilter=st.sampled_from([_PREFILTER, None]),
)
def test_the_scan_does_not_depend_on_the_chunk_size(
    tmp_path: Path, lines: list[str], chunk: int, final_newline: bool, prefilter: Prefilter | None
) -> None:
    data = ("\n".join(lines) + ("\n" if final_newline else "")).encode()
    log = tmp_path / "log"
    log.write_bytes(data)
    scanned = scan_hits(log, 1 << 20, chunk_bytes=chunk, prefilter=prefilter, words=True).hits
    assert [(h.line, h.offset, h.signature.name) for h in scanned] == reference_hits(
        data, words=True
    )


# Escape sequences as tools print them, and a redraw's carriage return (a progress
# frame before it), to be put anywhere in a line.
COLOURS = [
    "\x1b[31m", "\x1b[0m", "\x1b[1;38;5;9m", "\x1b[K", "\x1b(B", "\x1b]8;;f://x\x1b\\",
    "\r", "Progress (1): 4/12 kB\r",
]  # fmt: skip


@st.composite
def coloured_line(draw: st.DrawFn) -> str:
    line = draw(LINE_KINDS)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from(COLOURS)) + line[at:]
    return line


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    lines=st.lists(coloured_line(), max_size=50),
    chunk=st.integers(1, 700),
    prefilter=st.sampled_from([_PREFILTER, None]),
)
# Found by a CI run: two carriage returns before the break are one CRLF break.
@example(lines=["test result: ok. 3 passed; 0 failed\r\r"], chunk=1, prefilter=None)
def test_a_drawn_log_is_scanned_as_a_reader_sees_it_whatever_the_chunk_size(
    tmp_path: Path, lines: list[str], chunk: int, prefilter: Prefilter | None
) -> None:
    # Each line is matched without its escape sequences and stale frames; its number and
    # offset are those of the line in the file.
    data = ("\n".join(lines) + "\n").encode()
    log = tmp_path / "log"
    log.write_bytes(data)
    scanned = scan_hits(log, 1 << 20, chunk_bytes=chunk, prefilter=prefilter, words=True).hits
    assert [(h.line, h.offset, h.signature.name) for h in scanned] == reference_hits(
        data, words=True
    )


# pytest --color=yes and gcc -fdiagnostics-color=always, as they print.
COLOURED_PYTEST = (
    "\x1b[1m============================= test session starts ==============================\x1b[0m\n"
    "collected 1 item\n\n"
    "test_calc.py \x1b[31mF\x1b[0m\x1b[31m                                   [100%]\x1b[0m\n\n"
    "\x1b[31m\x1b[1m____________________________ test_add ____________________________\x1b[0m\n"
    ">       \x1b[94massert\x1b[39;49;00m add(\x1b[94m2\x1b[39;49;00m) == \x1b[94m4\x1b[39;49;00m\n"
    "\x1b[1m\x1b[31mE       assert 0 == 4\x1b[0m\n\n"
    "\x1b[1m\x1b[31mtest_calc.py\x1b[0m:4: AssertionError\n"
    "\x1b[31mFAILED\x1b[0m test_calc.py::\x1b[1mtest_add\x1b[0m - assert 0 == 4\n"
    "\x1b[01m\x1b[Kmain.c:2:12:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: \x1b[m\x1b[K"
    "‘\x1b[01m\x1b[Kundeclared_total\x1b[m\x1b[K’ undeclared\n"
)


@pytest.mark.parametrize("prefilter", PASSES)
@pytest.mark.parametrize("chunk", [1 << 20, 64, 7])
def test_a_coloured_log_gives_the_evidence_of_its_plain_twin(
    tmp_path: Path, prefilter: Prefilter | None, chunk: int
) -> None:
    coloured = write_log(tmp_path / "coloured", COLOURED_PYTEST)
    twin = write_log(tmp_path / "plain", plain_bytes(COLOURED_PYTEST.encode()).decode())
    hits = scan_hits(coloured, 1 << 20, chunk_bytes=chunk, prefilter=prefilter, words=False).hits
    twin_hits = scan_hits(twin, 1 << 20, chunk_bytes=chunk, prefilter=prefilter, words=False).hits
    assert [h.signature.name for h in hits] == [
        "pytest-assertion",
        "pytest-failed",
        "located-error",
    ]
    assert [(h.line, h.signature) for h in hits] == [(h.line, h.signature) for h in twin_hits]
    text = render_evidence(extract_evidence(coloured, window_bytes=1 << 20, max_bytes=8192))
    assert "\x1b" not in text and "> 8| E       assert 0 == 4" in text
    assert text == render_evidence(extract_evidence(twin, window_bytes=1 << 20, max_bytes=8192))


# Lines the pre-pass lets through (the forms without their look-arounds) that the exact
# expression turns away, and the lines that must still be found among them.
NEAR_MISSES = [
    "deal.go:5:2: note: see above",
    "deal.txt:3:1: errorless wording",
    "notes.txt:1:2: E3021234567 is a part number",
    "/usr/lib/libthing: fatal flaw, says the changelog",
]


@pytest.mark.parametrize("prefilter", PASSES)
def test_near_misses_are_turned_away_and_a_storm_of_them_hides_nothing(
    tmp_path: Path, prefilter: Prefilter | None
) -> None:
    # More near misses in one chunk than the pre-pass puts up with: the rest of the chunk
    # is read by ``re`` alone, and the real lines among and after them are still found.
    storm = NEAR_MISSES * (MAX_NEAR_MISSES_PER_CHUNK // 2)
    lines = ["ordinary", *storm, "E       assert 3 == 2", *storm, "deal.go:5:2: undefined: x"]
    data = ("\n".join(lines) + "\n").encode()
    log = tmp_path / "log"
    log.write_bytes(data)
    for chunk in (1 << 20, 4096):
        scanned = scan_hits(log, 1 << 20, chunk_bytes=chunk, prefilter=prefilter).hits
        assert [(h.line, h.offset, h.signature.name) for h in scanned] == reference_hits(data)
        assert [h.signature.name for h in scanned] == ["pytest-assertion", "located-message"]


@needs_re2
def test_each_near_miss_reaches_the_exact_check() -> None:
    # The pre-pass is wide on purpose: these lines pass it, so the exact expression is
    # what turns them away (else the storm test above would test nothing).
    assert _PREFILTER is not None
    for line in NEAR_MISSES:
        assert _PREFILTER.search(bytearray(b"\n" + line.encode() + b"\n"), 0, len(line) + 2)


@needs_re2
@pytest.mark.parametrize(("line", "name"), SAMPLES, ids=[name for _, name in SAMPLES])
def test_the_prepass_lets_every_signature_line_through(line: str, name: str) -> None:
    # Checked on the pre-pass alone: a line it missed would be missed by the scan. The
    # pre-pass reads a chunk as the scan does: gh's job and step columns taken off.
    assert _PREFILTER is not None
    data = bytearray(b"ordinary\n" + without_columns(line.encode()) + b"\n")
    found = _PREFILTER.search(data, 0, len(data))
    assert found is not None and found.start() == data.index(b"\n"), (line, name)


# A signature line with a few bytes changed: often still a signature line, often not.
EDITED_LINES = st.tuples(
    st.sampled_from([line for line, _ in SAMPLES]),
    st.integers(0, 80),
    st.integers(0, 3),
    st.text(alphabet="Er :09.-_/()'*\t\r\nxé", max_size=3),
).map(lambda t: t[0][: t[1]] + t[3] + t[0][t[1] + t[2] :])


@needs_re2
@settings(max_examples=examples(300), deadline=None)
@given(line=EDITED_LINES)
def test_the_prepass_lets_through_every_line_a_signature_matches(line: str) -> None:
    assert _PREFILTER is not None
    # The pre-pass reads a line as the scan hands it over: as a reader sees it, without
    # gh's columns.
    data = bytearray(b"\n" + without_columns(plain_bytes(line.encode())) + b"\n")
    if reference_hits(bytes(data)):
        assert _PREFILTER.search(data, 0, len(data)) is not None, line


# Lines at the seams of the joined expression: a timestamp whose own digits look like a
# located line, digit-first paths that are not timestamps, a digit before a plain
# signature, a commit hash that is all digits, forms that take in the line's newline.
SEAM_LINES = [
    "2026-12-01T02:53:07 - error TS2322: nope",
    "2026-12-01T02:53:07.5Z src/deal.ts:3:5 - error TS2322: Type",
    "2024-11-report.log:3: error: bad",
    "2026-12-01 report.py:3:1: F401 unused",
    "2026-12-01T02:53:07Z KeyError",
    "2026-12-01T02:53:07Z  files would be reformatted",
    "7E       assert 3 == 2",
    '1234567 "fix: x": touches both production code and tests',
    "12 files would be reformatted",
    "3rd.py:4:1: E302 expected 2 blank lines",
    "KeyError\r",
    "pkg.KeyboardInterrupt",
    "ValueError\nE       assert 1",
    "/usr/bin/ld: fatal: cannot find -lthing",
    "thing.go:5:2: note: see above",
    "ERROR: test_x (t.T.test_x)",
    "#8 0.5 ERROR x",
    "#8 ERROR x",
    "#8 1.5 #9 ERROR x",
    "#8 1.5 2026-12-01T02:53:07Z E       assert 1",
    "2026-12-01T02:53:07Z #8 1.5 E       assert 1",
    "[2026-12-01T02:53:07Z] [ERROR] Failed to execute goal",
    "[2026-12-01] E       assert 1",
    "[ERROR] Failed to execute goal",
    "#8 1.5 src/deal.py:3: error: x",
    "::error",
    "::error file=x::",
    "::errors::x",
    "::warning file=x.py::F401",
    "2026-12-01T02:53:07.123456Z 00O+E       assert 1",  # a continuation: not a line start
    "2026-12-01T02:53:07.123456Z 00X E       assert 1",
    "2026-12-01T02:53:07.123456Z 0O E       assert 1",
    "2026-12-01T02:53:07.123456Z 00O 00E E       assert 1",
    "2026-12-01T02:53:07Z 00E KeyError: 'x'",
    "2026-12-01 00E ERROR: x",
]


@pytest.mark.parametrize("prefilter", PASSES)
@pytest.mark.parametrize("line", SEAM_LINES)
def test_the_joined_expression_agrees_with_each_signature_alone(
    tmp_path: Path, line: str, prefilter: Prefilter | None
) -> None:
    data = ("ordinary\n" + line + "\nordinary\n").encode()
    log = tmp_path / "log"
    log.write_bytes(data)
    scanned = scan_hits(log, 1 << 20, prefilter=prefilter, words=False).hits
    assert [(h.line, h.offset, h.signature.name) for h in scanned] == reference_hits(data)


@pytest.mark.parametrize("prefilter", PASSES)
def test_a_line_longer_than_the_carry_is_skipped_not_misnumbered(
    tmp_path: Path, prefilter: Prefilter | None
) -> None:
    data = b"a\n" + b"E   " + b"y" * (MAX_LINE_BYTES * 3) + b"\nb\nE       assert 1\n"
    log = tmp_path / "log"
    log.write_bytes(data)
    hits = scan_hits(log, 1 << 30, chunk_bytes=4096, prefilter=prefilter, words=False).hits
    assert [(h.line, h.signature.name) for h in hits][-1] == (4, "pytest-assertion")
    assert hits[-1].offset == data.index(b"E       assert 1")


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.binary(max_size=4000), budget=st.integers(0, 2000), chunk=st.integers(1, 300))
def test_arbitrary_bytes_never_crash_nor_exceed_the_budget(
    tmp_path: Path, data: bytes, budget: int, chunk: int
) -> None:
    log = tmp_path / "log"
    log.write_bytes(data)
    evidence = extract_evidence(log, window_bytes=1 << 20, max_bytes=budget, chunk_bytes=chunk)
    assert len(render_evidence(evidence).encode()) <= budget


# ---- in the bundle -----------------------------------------------------------------------


def inputs(tmp_path: Path, failed_log: Path | None, check_log: Path | None) -> BundleInputs:
    ticket = tmp_path / "T-1.md"
    ticket.write_text('+++\nid = "T-1"\n+++\nFix it.\n')
    return BundleInputs(
        run_state="{}",
        run_record="[]",
        ticket_path=ticket,
        failed_log=failed_log,
        check_name="tests" if check_log else None,
        check_log=check_log,
        diff=b"",
        diff_truncated=False,
    )


def test_a_check_log_that_is_the_failed_log_is_sent_once(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log", "ordinary\n" * 10 + "E       assert 3 == 2\n")
    bundle = build_bundle(inputs(tmp_path, log, log), ContextLimits())
    assert bundle.section("check_output").text == "ordinary\n" * 10 + "E       assert 3 == 2\n"
    assert bundle.section("failed_log_tail").text == ""
    assert bundle.section("failed_log_tail").note == (
        "the failed log is the check's log: its end is in check_output"
    )
    # Shown once in full, so the evidence is the matched line alone, with its number.
    assert bundle.render().count("ordinary\n") == 10
    evidence = bundle.section("evidence")
    assert evidence.text == "--- line 11 (pytest-assertion) ---\n>11| E       assert 3 == 2\n"
    assert evidence.note is not None and evidence.note.endswith(
        "the log is below in full, so no context lines"
    )


def test_a_stage_log_ending_with_the_check_output_sends_the_shared_part_once(
    tmp_path: Path,
) -> None:
    check_text = "".join(f"check line {i}\n" for i in range(20)) + "E       assert 3 == 2\n"
    stage = write_log(tmp_path / "stage.log", "stage preamble\n" + check_text)
    check = write_log(tmp_path / "check.log", check_text)
    bundle = build_bundle(inputs(tmp_path, stage, check), ContextLimits())
    assert bundle.section("check_output").text == check_text
    tail = bundle.section("failed_log_tail")
    assert tail.text == "stage preamble\n"
    assert tail.note == "its end is check_output's text: sent once, there"
    assert bundle.render().count("check line 5\n") == 1


def test_an_engine_stage_without_a_check_gets_evidence_from_its_own_log(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log", "npm ERR! code E404\n" + "ordinary\n" * 5000)
    bundle = build_bundle(inputs(tmp_path, log, None), ContextLimits())
    evidence = bundle.section("evidence")
    assert evidence.text.startswith("--- lines 1-4 (npm-error) ---\n>1| npm ERR! code E404\n")
    assert evidence.note is not None and "of the failed stage's log" in evidence.note
    assert "npm ERR!" not in bundle.section("failed_log_tail").text


def test_a_bundle_written_before_evidence_existed_loads_and_renders_the_same() -> None:
    # Written by the bundle code as it was before the evidence section and its config keys.
    raw = (DATA / "bundle-before-evidence.json").read_text()
    bundle = ContextBundle.model_validate_json(raw)
    assert [s.name for s in bundle.sections] == [
        "run_state", "ticket", "run_record", "failed_log_tail", "check_output", "diff"
    ]  # fmt: skip
    assert bundle.render() == (DATA / "bundle-before-evidence.rendered.txt").read_text()


def test_a_bad_scan_window_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[stages]]\nname = "a"\ncommand = ["true"]\n[recovery.context]\nevidence_scan_bytes = 12\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert "evidence_scan_bytes" in message and str(config) in message
    config.write_text(
        '[[stages]]\nname = "a"\ncommand = ["true"]\n'
        "[recovery.context]\nevidence_scan_bytes = 1048576\nmax_evidence_bytes = 4096\n"
    )
    limits = load_config(config).config.recovery.context
    assert (limits.evidence_scan_bytes, limits.max_evidence_bytes) == (1 << 20, 4096)


def test_a_form_the_joined_expression_cannot_keep_exact_is_refused() -> None:
    # A repeated digit class first could match a timestamped line from its first byte,
    # which the table never does: the table is refused at import rather than misread.
    from orchestrator.reading.signature_match import _combined
    from orchestrator.reading.signatures import Signature

    with pytest.raises(ValueError, match="repeated digit class"):
        _combined((Signature("digits", 0, rb"\d+ files"),))
    assert _combined((Signature("digits", 0, rb"\d\d* files"),)).search(b"\n12 files\n")
