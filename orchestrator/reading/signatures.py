"""The signature table: the lines tools print when something failed, as data.

Signatures are data (``SIGNATURES``): a name, a rank (0 = the most telling) and a pattern
that must match at the start of a line (after an optional CI timestamp). They are joined
into one expression by ``reading.signature_match``, whose rules every pattern follows
(see the comment above ``SIGNATURES``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["SIGNATURES", "WORDS", "Signature"]


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


# A line that holds error words and no signature (``reading.ranking``): ranked by its
# words, its rarity and its shape.
WORDS: Final = Signature("error-words", 3, b"")
