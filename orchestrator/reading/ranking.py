"""What a log line is worth to a reader looking for why a run failed: pure functions.

Signatures (``signatures.SIGNATURES``) know how the tools people use say what went wrong.
A log nobody here wrote holds tools nobody here listed, so two general readings sit
beside them, as the best log tools do:

* **Error words.** A line that says ``error``, ``failed``, ``fatal``, ``exception``,
  ``denied``, ``refused``, ``timed out``, ``not found``, ``cannot``, ``unable to``,
  ``undefined``, ``invalid``, ``no match``, ``nothing provides``, ``expected … but`` …
  anywhere in it, whatever prefix the CI system put in front (``##[error]``,
  ``2019-01-01 12:00:00.123 | ``, ``[task 2019-…] 12:00:00 ERROR - ``, ``│ ``) is a
  candidate, read in the end window of the log (``VOCABULARY_WINDOW_BYTES``).
* **Rarity.** Lines are compared by their template (``domain.line_templates``: numbers,
  hashes, paths, times masked). A candidate whose template the log prints once is worth
  more than one printed a hundred times (a warning every file gets); one whose template a
  green run of the same check also printed (``domain.baseline``) is ordinary output.

And two shapes lose rank whatever matched them:

* **Consequences**: a line that only says that something failed, not what (``make:
  ***``, gradle's ``FAILURE: Build failed``, ``The command "…" exited with 1``,
  ``Error: Process completed with exit code 1``, npm's ``ELIFECYCLE``, ``ninja: build
  stopped``). Kept when there is room, never a reason to cut the log's tail.
* **Tallies of nothing**: ``0 errors``, ``failures: 0``, ``-Werror=…`` flags.

``score`` turns a candidate into one number; the evidence budget is spent by score and by
distinct template, not first come. Pure.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from orchestrator.domain.line_templates import template_of
from orchestrator.reading.prefilter import _import_re2

__all__ = [
    "CONFIDENT_SCORE",
    "VOCABULARY_WINDOW_BYTES",
    "benign",
    "consequence",
    "reasons",
    "score",
    "vocabulary",
]

# How much of the end of the window is read for error words. RE2 reads it at a few
# hundred MB/s; ``re`` alone (a platform without the wheel) about a hundredth of that,
# so it reads less.
VOCABULARY_WINDOW_BYTES: Final = 4 << 20
VOCABULARY_WINDOW_BYTES_WITHOUT_RE2: Final = 256 << 10

# Words a failure is said in. Whole words at their start (``\b``): ``errors.go`` and
# ``onerror`` are not errors; ``Errno``, ``AssertionError``, ``TimeoutException`` are (the
# class names are matched by their ending). Strong words say that something went wrong;
# weak ones often do, and as often describe (``--missing``, ``expected 3 args``).
_STRONG: Final = (
    rb"\b(?:error|errors|fail|failed|failing|failure|failures|fatal|panic|panicked"
    rb"|denied|refused|forbidden|unauthori[sz]ed|cannot|can't|couldn't|could not"
    rb"|unable to|no such|not found|not available|no match|nothing provides|undefined"
    rb"|mismatch|do not match|does not match|killed|segmentation fault|sanitizer"
    rb"|timed out|too many requests|toomanyrequests|rate limit|abort|aborted"
    # A checker's verdict on the code: ``Code style issues found``, ``1 offense
    # detected``, ``3 problems``, ``Found 2 errors``.
    rb"|(?:issues?|problems?|offen[cs]es?|violations?) (?:found|detected|reported))\b"
    # A class name ending so (``MatchError``, ``IOError``): its capital, case and all.
    rb"|(?-i:\b[a-zA-Z]\w*(?:Error|Exception|Failure|Fault))\b"
    # The marks test runners put before a failed case.
    rb"|\xe2\x9c\x97|\xe2\x9c\x95|\xe2\x9c\x96|\xe2\x9d\x8c"
)
_WEAK: Final = (
    rb"\b(?:invalid|unexpected|violation|timeout|deprecated|offen[cs]es?|credentials?"
    rb"|expected|errno|traceback|missing|incompatible|conflict|unresolved|unsatisfied"
    rb"|broken|crash|crashed|exception|assert|assertion)\b"
)
_WORDS: Final = _STRONG + b"|" + _WEAK
_STRONG_WORDS: Final = re.compile(_STRONG, re.IGNORECASE)
# What may stand before a line's first strong word when the line states a failure rather
# than mention one in passing, read on the line's template (a timestamp or a path is one
# token there): labels each ended by a colon, a bracket, a bar or a dash
# (``ld: <path>: undefined``, ``[task <time>] <time> ERROR -``, ``<time> | ERROR``), and
# at most one bare word (``npm error``).
_STATED_BEFORE: Final = re.compile(
    rb"^[^\w<\[]*(?:\[[^\]]*\]\s*|[^\s]+(?::|\]|\s[|=-]|\s?>)\s*)*(?:[\w<>.-]+\s)?[^\w<]*$"
)


def _compile_vocabulary() -> tuple[object, int]:
    re2 = _import_re2()
    if re2 is not None:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.never_capture = True
        options.max_mem = 16 << 20
        return re2.compile(b"(?i)" + _WORDS, options), VOCABULARY_WINDOW_BYTES
    return re.compile(_WORDS, re.IGNORECASE), VOCABULARY_WINDOW_BYTES_WITHOUT_RE2


_VOCABULARY, _WINDOW = _compile_vocabulary()


def vocabulary() -> tuple[object, int]:
    """The compiled error-word expression (``search(buf, pos, endpos)``) and the bytes
    of the window's end it is run over."""
    return _VOCABULARY, _WINDOW


# A line that says a step failed without saying what: the cause is above it.
_CONSEQUENCE: Final = re.compile(
    rb"(?:^|\s)make(?:\[\d+\])?: \*\*\*|^FAILURE: |BUILD FAIL(?:ED|URE)|^\s*\*\s*Try:"
    # (not 124 or 137: a timeout's and a kill's status say why, not only that)
    rb"|exited with (?:code )?(?!124\b|137\b)-?\d+\.?\s*$|Process completed with exit code"
    rb"|\bELIFECYCLE\b|npm ERR! (?:errno|syscall|path|A complete log|Failed at)"
    rb"|ninja: build stopped|Command exited with non-zero status|returned (?:a )?non-zero"
    rb"|InvocationError|\berror: Bad exit status|Error \d+\s*$|will not run after|"
    rb"^\s*(?:ERROR|error): (?:Command|Job) failed|^\s*\d+ (?:errors?|failures?) found"
    rb"|^\W*\d+ (?:failing|failed|errors?|failures?)\b|\d+/\d+ passing"
    rb"|Tests? (?:run|suite)s?:? [^\n]*(?:Failures|failed)|^\s*FAILED \(|Errors? occurred"
    rb"|see (?:the )?(?:log|above|output)|for (?:more )?details|full log|re-run"
    rb"|\bld returned \d+ exit status|\bCommand failed\b|Child return code was"
    rb"|^\s*Bad exit status|build errors:\s*$",
    re.IGNORECASE,
)
# A tally of no failures, a flag that names an error class: words without a failure.
_BENIGN: Final = re.compile(
    rb"\b0 (?:errors?|failures?|failed|fail|warnings?)\b|\b(?:errors?|failures?|failed)[:=] ?0\b"
    rb"|-W(?:no-)?error\b|-Werror=|\bno errors?\b|\bwithout errors?\b|\berror_reporting\b"
    rb"|\bon-?error\b|\bignore[-_ ]?errors?\b|\bexpected_?fail|\bxfail\b|\bif-no-files-found\b"
    # A test a runner reports as passed or skipped, whatever its name says (``test_fails_cleanly ...
    # ok``, ``[ RUN ] errors out when …: 2 ms OK``, ``--- PASS: TestTimeout``, ``✓ …``).
    rb"|(?:\bok|\bpassed|\bPASS(?:ED)?|\bSKIP(?:PED)?|\bskipped|\bignored|\bpending)"
    rb"(?:\s*\(?[\d.]+\s*m?s\)?)?\s*\]?\s*$|^\s*(?:ok|PASS(?:ED)?|--- (?:PASS|SKIP))\b"
    rb"|^\s*(?:\xe2\x9c\x93|\xe2\x9c\x94|\xe2\x88\x9a)",
    re.IGNORECASE,
)


# A failure's words then a colon and what failed (``Package required but not available:
# 'x'``, ``No match for argument: x``, ``rmtree failed: [Errno 30]``): a statement.
_COLON_AFTER: Final = re.compile(rb"[^\s:]{0,12}:(?:\s|$)")

# An exception named by its qualified class, then its message: the last line of a Python
# traceback, a JVM exception, a Ruby error (``voluptuous.error.MultipleInvalid: …``,
# ``java.lang.AssertionError: …``, ``ActiveRecord::RecordInvalid: …``), whatever the
# class's name ends with.
_QUALIFIED_EXCEPTION: Final = re.compile(
    rb"^\s*(?:[a-z_]\w*(?:\.|::))+[A-Z]\w*:\s|^\s*[A-Z]\w*(?:::[A-Z]\w*)+:\s"
)


def consequence(line: bytes) -> bool:
    return _CONSEQUENCE.search(line) is not None


def benign(line: bytes) -> bool:
    return _BENIGN.search(line) is not None


# A score at least this high is a cause stated outright: a tool's own error line (a
# signature of rank 0 to 2, not a consequence, not printed by every green run), or a
# failure stated in words (not mentioned in passing) that no green run printed. With one,
# the log's tail may be cut to its last words.
CONFIDENT_SCORE: Final = 6.0

# What a signature's rank is worth (0 = the most telling); error words alone rank 3.
_RANK_WORTH: Final = {0: 10.0, 1: 8.0, 2: 6.0, 3: 4.5, 4: 2.0}


# What the log's own prefix says of a line's level: a line the program logged as an
# error is worth more than one it logged as information (a compiler's warning quoted at
# INFO, a source line in a note).
_LEVEL_WORTH: Final = {
    b"ERROR": 1.0, b"FATAL": 1.0, b"CRITICAL": 1.0,
    b"INFO": -1.5, b"DEBUG": -1.5, b"TRACE": -1.5, b"NOTICE": -1.0,
}  # fmt: skip


Statement = Literal["weak", "exception", "stated", "mentioned"]


def statement(line: bytes) -> Statement:
    """How a line that holds error words says them: weak words alone, an exception
    stated by its class, a failure stated (labels before its strong word, or ``: what``
    after it), or strong words mentioned in passing."""
    if _STRONG_WORDS.search(line) is None:
        return "weak"
    if _QUALIFIED_EXCEPTION.match(line) is not None:
        return "exception"
    template = template_of(line)
    strong = _STRONG_WORDS.search(template)
    if strong is not None and (
        _STATED_BEFORE.match(template[: strong.start()])
        or _COLON_AFTER.match(template, strong.end())
    ):
        return "stated"
    return "mentioned"


def score(
    rank: int,
    line: bytes,
    *,
    count: int,
    known: bool | None,
    words_only: bool = False,
    level: bytes | None = None,
) -> float:
    """What a candidate line is worth: its signature's rank, the shape of the line, how
    often the log prints its template (``count``), whether a green run printed it
    (``known``: None when there is no baseline), and the level the log's prefix gave it.
    Higher is more telling."""
    worth = _RANK_WORTH.get(rank, 1.0) + _LEVEL_WORTH.get(level or b"", 0.0)
    if words_only:
        said = statement(line)
        if said == "weak":
            worth -= 2.0
        elif said == "exception":
            # Stated as a runtime states one: worth a traceback's last line.
            worth = max(worth + 1.5, _RANK_WORTH[1])
        elif said == "stated":
            worth += 1.5  # a failure stated, not mentioned in passing
        else:
            worth -= 1.0
    if benign(line):
        worth -= 6.0
    if consequence(line):
        worth -= 4.0
    if count == 1 and words_only:
        worth += 1.0  # a signature is specific already; words are when the log says them once
    elif count > 100:
        worth -= 3.0
    elif count > 30:
        worth -= 1.5
    if known is True:
        worth -= 6.0
    elif known is False:
        worth += 2.0
    return worth


def reasons(
    line: bytes, *, count: int, known: bool | None, words_only: bool = False
) -> tuple[str, ...]:
    """Why a kept line ranks where it does, in a few words each (the bundle shows them
    beside the signatures that matched it): how it states the failure, how often the log
    says it, whether green runs say it."""
    why = []
    if consequence(line):
        why.append("a consequence")
    elif words_only:
        said = statement(line)
        why.append(
            {"exception": "an exception stated", "stated": "a failure stated"}.get(
                said, "failure words"
            )
        )
    if count > 1:
        why.append(f"said {count} times")
    elif words_only:
        why.append("said once")  # what made words alone worth showing
    if known is not None:
        why.append("green runs say it too" if known else "no green run says it")
    return tuple(why)
