"""Infrastructure failures recognised in a failed program's own output: a table of named
signs, and one pure function that reads the end of the output against it.

Every infrastructure class is told this way, for stages and checks alike (engines
classify their own error events, ``classify``), each sign naming a mechanism — what
happened — in the words its own layer prints for it, never one tool's habit (issue 44;
``mechanisms`` lists the words and their sources):

* ``resource_exhausted`` — the machine ran out of something: the disk (ENOSPC "No space
  left on device"), a disk quota (EDQUOT "Disk quota exceeded"), memory (ENOMEM "Cannot
  allocate memory", Python's ``MemoryError``, a runtime's own out-of-memory report — V8,
  the JVM, Go, Rust, .NET —, a compiler whose back end was killed, or an OOM kill — see
  below).
* ``outage``, ``rate_limited``, ``auth_error`` — a service answered: an HTTP status as a
  client reports it, by family (5xx, 429, 401/403/407); a certificate not for its host;
  credentials missing or refused. Never a bare number, never a 404, never a server on the
  loopback (the check's own).
* ``timeout`` — the job's own time limit (the CI's, a runner's on the whole run).
* ``network`` — the way to a host failed: DNS ("Could not resolve host", "Temporary
  failure in name resolution", getaddrinfo, "Name or service not known", Go's "no such
  host"), a refused, reset, unreachable, failed or timed-out connection, TLS (certificate
  verification, the handshake), a tool saying its error was the network's.
* ``config_error`` — the machine lacks what the build needs: a program the shell could
  not find ("bash: line 1: eslint: command not found", status 127), a system package, a
  compiler or toolchain, a binary it can execute (ENOEXEC), a rootless container's ids.
  A package or compiler that cannot be found may be a symptom (``Sign.symptom``): another
  sign within ``SYMPTOM_LINES`` above it, before a line about the code, is its cause and
  decides (apt's index that failed to download above its "Unable to locate package").

Why the end, and why the last sign: a program's last words say why it stopped; an
earlier "Connection refused" (a retried download, a test's captured log) says nothing
about a check that then failed on an assertion. So lines are read from the end up, and
the first line that decides, decides (``read_up``): a sign; an assertion (met first:
nothing is recognised and the failure goes to the recovery decision as before); or a
compiler's, type checker's or linter's report about the code (``CODE_REPORTS``), unless
the same line carries a sign. On one line an assertion wins, then the signs in table order
(the precise ones first), then a report about the code. ``recognise`` reads the last
``TAIL_LINES`` lines of at most ``TAIL_BYTES``; when they decide nothing, the caller may
read further up a long log (``failure``: every line below its lowest root-cause line, in
bulk — ``bulk`` —, then around its root-cause lines).

Reading a long log up costs little: most lines hold none of the words a check needs
(``literals.needed``), and one search for all of them (RE2's, ``prefilter.any_word``)
spares such a line every check but the alternatives that need no word. The gates only
skip a check that cannot match, so every line decides as it would without them — beyond
ASCII too: the few characters ``re`` folds onto an ASCII letter are spelt as that letter
in the gates' view (``_ASCII_FOLDS``).

Why an OOM kill needs the exit status too: "Killed" and "Out of memory" are common words
and the kernel's own report goes to its log, not to the program. The sign counts only
when the process ended by SIGKILL (exit status 137) and our timeout did not send it —
the caller passes ``timed_out`` and nothing is recognised then. A SIGKILL without the
words is not called an OOM kill: someone else may have sent it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from orchestrator.domain.log_line import without_prefix
from orchestrator.domain.terminal import plain
from orchestrator.engines.base import FailureClass
from orchestrator.reading import mechanisms
from orchestrator.reading.literals import alternatives, needed
from orchestrator.reading.prefilter import any_word

# A stage that is not an engine (the GitHub forge, a user's script) can name an
# infrastructure failure on a line of its output: "::failure-class::rate_limited".
FAILURE_MARKER = "::failure-class::"

TAIL_LINES = 200
TAIL_BYTES = 64 * 1024
# 128 + SIGKILL: the shell's convention, which the runner follows for a killed process.
KILLED_STATUS = 137
LINE_MAX_CHARS = 240


@dataclass(frozen=True)
class Sign:
    """One named way a program says the machine or the network failed it."""

    name: str
    failure: FailureClass
    what: str  # the words a verdict's reason uses
    # Its alternatives, joined: compiled (ignoring case) when first read, not on import.
    source: str
    # Only when the process died of a SIGKILL that was not ours (the OOM killer's).
    needs_kill: bool = False
    # Only when the program ended with this status (the shell's 127: not found).
    needs_status: int | None = None
    # What may be the consequence of another failure above it (a package not found when
    # the package index could not be downloaded): the lines above are read for a cause.
    symptom: bool = False
    # A line this matches is not the sign (a server on the loopback is the code's own).
    unless: re.Pattern[str] | None = None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, re.IGNORECASE)


@dataclass(frozen=True)
class Recognised:
    """The sign found, and the line it was found on (not redacted: the caller redacts)."""

    sign: Sign
    line: str

    @property
    def failure(self) -> FailureClass:
        return self.sign.failure

    def detail(self) -> str:
        """One line for the record and the verdict's reason: what, then the evidence."""
        return f"{self.sign.what} [{self.sign.name}]: {self.line}"


def _sign(
    name: str,
    failure: FailureClass,
    what: str,
    *alternatives: str,
    needs_kill: bool = False,
    needs_status: int | None = None,
    symptom: bool = False,
    unless: re.Pattern[str] | None = None,
) -> Sign:
    return Sign(
        name, failure, what, "|".join(alternatives), needs_kill, needs_status, symptom, unless
    )


R, N, C = FailureClass.RESOURCE_EXHAUSTED, FailureClass.NETWORK, FailureClass.CONFIG_ERROR
T, L, A, OUT = (
    FailureClass.TIMEOUT,
    FailureClass.RATE_LIMITED,
    FailureClass.AUTH_ERROR,
    FailureClass.OUTAGE,
)
# The shell's status for a command it could not find.
NOT_FOUND_STATUS = 127
# How far above a symptom (``Sign.symptom``) its cause is looked for: a package manager's
# index failures and its "Unable to locate package" sit a few lines apart.
SYMPTOM_LINES = 60

# A URL on this machine: an HTTP status from a server the check itself started (a test's
# web app answering 500) is the code's, not a service's.
_LOOPBACK = re.compile(
    r"://(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)(?![\w.-])", re.IGNORECASE
)

SIGNS: tuple[Sign, ...] = (
    _sign("disk-full", R, "the disk is full (ENOSPC)", r"no space left on device", r"\bENOSPC\b"),
    _sign(
        "disk-quota",
        R,
        "the disk quota is exceeded (EDQUOT)",
        r"disk quota exceeded",
        r"\bEDQUOT\b",
    ),
    _sign(
        "no-memory",
        R,
        "memory could not be allocated (ENOMEM)",
        r"\[Errno 12\] Cannot allocate memory",
        r"\bfork: Cannot allocate memory",
        r"virtual memory exhausted",
        r"\bENOMEM\b",
        # gcc/g++ when the kernel killed its back end (cc1, cc1plus): memory, nearly always.
        r"Killed signal terminated program",
        # Python's own: the last line of its traceback (or pytest's ``E`` line). Case
        # matters here: "memoryerror" in prose is not the exception.
        r"(?-i:^(?:E\s+)?MemoryError\b)",
    ),
    # A runtime's own report that its heap is spent (V8, the JVM, Go, Rust, .NET, ...):
    # the runtime says so itself, so no exit status is needed (``mechanisms``).
    _sign(
        "runtime-out-of-memory",
        R,
        "the runtime ran out of memory",
        *mechanisms.RUNTIME_OUT_OF_MEMORY,
    ),
    _sign(
        "oom-kill",
        R,
        "the process was killed for want of memory (SIGKILL)",
        r"\bout of memory\b",
        r"\boom[-_ ]?kill",
        # bash/dash reporting a child the kernel killed: "bash: line 1: 4242 Killed  cmd".
        r"^(?:\S+: )?(?:line \d+: )?\s*(?:\d+:?\s+)?Killed\b",
        needs_kill=True,
    ),
    # A service that said "not so fast": a 429, a registry's pull limit, an API's limit.
    _sign(
        "rate-limited",
        L,
        "a service limited the rate of requests",
        r"\btoomanyrequests\b",
        r"\btoo many requests\b",
        *mechanisms.said_number("429"),
        *mechanisms.http_said(mechanisms.RATE_LIMIT),
        r"\btoo many 429 error responses\b",
        r"\brate limit (?:exceeded|reached)",
        r"\breached your (?:pull )?rate limit",
        r"\bsecondary rate limit",
        unless=_LOOPBACK,
    ),
    # Credentials missing or refused: nothing a retry or a code change fixes.
    _sign(
        "credentials",
        A,
        "credentials are missing or were refused",
        r"\bno valid credential sources\b",
        r"\bunable to locate credentials\b",
        r"\bNoCredentialProviders\b",
        *mechanisms.said_number("401"),
        r"\b401 Unauthorized\b",
        r"\bauthentication (?:required|failed)\b",
        r"\bbad credentials\b",
        r"\bcould not read Username\b",
        r"\bPermission denied \(publickey",
        # a token said to be one: a parser's "invalid token" is the code's syntax
        r"\b(?:missing|invalid|expired) (?:api |access |auth )(?:token|credentials)\b",
        r"\b(?:missing|invalid|expired) credentials\b",
        r"\brequires authentication\b",
        r"\binvalid username or password\b",  # a forge refusing what git sent
    ),
    # A service that refused what the credentials asked for: an HTTP 401, 403 or 407 as
    # a client reports it, a registry's DENIED, a forge refusing a push.
    _sign(
        "access-refused",
        A,
        "a service refused access (HTTP 401/403)",
        *mechanisms.ACCESS_REFUSED,
        unless=_LOOPBACK,
    ),
    # A job that ran out of time: the CI's own limit, a runner's, a test harness's on
    # the whole run (a single test's timeout is the code's).
    _sign(
        "job-timeout",
        T,
        "the job ran out of time",
        r"\bexited with 124\b",
        r"\bexit (?:code|status):? 124\b",
        r"^Tests? timed out\b",
        *mechanisms.JOB_TIME_LIMITS,
        r"\btimed out waiting for\b",
        r"\bTEST-UNEXPECTED-TIMEOUT\b",
        r"\bDeadline ?Exceeded\b",
    ),
    # The host answered, wrongly: its certificate is not for its name, a package index
    # lists what it does not serve.
    _sign(
        "service-broken",
        OUT,
        "a service answered with an error",
        r"\bno certificate subject alternative name matches\b",
        r"\bcertificate (?:has expired|is not valid for)",
        r"^(?:E|Err|W): Failed to fetch \S+\s+(?:4\d\d|5\d\d)\b",
        r"\bcould not be found at the URI\b",
    ),
    # A server's error (HTTP 5xx) as a client reports it, or on a line naming a package
    # registry's host: the service failed, and a later retry may find it back.
    _sign(
        "server-error",
        OUT,
        "a service answered with a server error (HTTP 5xx)",
        *mechanisms.HTTP_5XX,
        unless=_LOOPBACK,
    ),
    # The machine or the build's own settings lack something no code change in the project
    # gives: a system package no repository provides, a simulator destination, a TLS
    # version the client cannot speak. (Not a 404 on a download: a cache step after the
    # failure meets one as often as the build does. Not a read-only file system: in the
    # sandbox every write outside a stage's writable paths meets one, and a check that
    # fails on its own after such a write is the code's.) A package that cannot be found
    # is what a package index that failed to download looks like: a symptom.
    _sign(
        "unresolvable-system-package",
        C,
        "a system package the build needs cannot be installed",
        r"\bNo match for argument:",
        r"\bnothing provides\b",
        r"\bUnable to locate package\b",
        r"\bhas no installation candidate\b",
        r"\bPackages? required (?:and available )?but (?:not available|unsuitable)",
        r"\bNo package \S+ available\b",
        symptom=True,
    ),
    _sign(
        "environment",
        C,
        "the build environment is not set up for this",
        r"\bUnable to find a destination matching\b",
        r"\bReceived fatal alert: protocol_version\b",
        *mechanisms.USER_NAMESPACE,
        *mechanisms.CONTAINER_ENGINE,
    ),
    # A compiler, linker or toolchain version the machine lacks (a symptom too: its
    # download may have failed above).
    _sign(
        "missing-toolchain",
        C,
        "a compiler or toolchain the build needs is missing",
        *mechanisms.MISSING_TOOLCHAIN,
        symptom=True,
    ),
    _sign(
        "exec-format",
        C,
        "a program is not executable on this machine (ENOEXEC)",
        *mechanisms.EXEC_FORMAT,
    ),
    _sign(
        "tls",
        N,
        "a TLS connection failed",
        r"CERTIFICATE_VERIFY_FAILED",
        r"certificate verify failed",
        r"server certificate verification failed",
        r"unable to get local issuer certificate",
        r"\b(?:TLS|SSL) handshake (?:timeout|failed|failure|error)",
        r"\btls: handshake failure",
        r"\bSSLError\b",
    ),
    _sign(
        "dns",
        N,
        "a host name could not be resolved (DNS)",
        r"temporary failure in name resolution",
        r"\btemporary failure resolving\b",  # apt's words for EAI_AGAIN
        r"could not resolve host",
        r"\bgetaddrinfo\b",
        r"name or service not known",
        r"\bname does not resolve\b",  # musl's EAI_NONAME
        r"nodename nor servname provided",
        r"\bEAI_AGAIN\b",
        r"\blookup \S+(?: on \S+)?: no such host",
        r"could not resolve hostname",
    ),
    _sign(
        "connection-refused",
        N,
        "a connection was refused",
        r"connection refused",
        r"\bECONNREFUSED\b",
    ),
    _sign(
        "connection-reset",
        N,
        "a connection was reset",
        # "Connection reset by peer" (ECONNRESET's words), Java's "Connection reset".
        r"\bconnection reset\b",
        r"\bECONNRESET\b",
    ),
    _sign(
        "network-unreachable",
        N,
        "the network is unreachable",
        r"network is unreachable",
        r"no route to host",
        r"\bENETUNREACH\b",
        r"\bEHOSTUNREACH\b",
    ),
    _sign(
        "connection-timeout",
        N,
        "a connection timed out",
        r"connection timed out",
        r"\bconnect(?:ion)? timeout\b",
        r"\bETIMEDOUT\b",
        r"\bReadTimeoutError\b",
        r"\bConnectTimeoutError\b",
        r"\bOperation timed out\b",  # curl's (28), ETIMEDOUT's words on BSD and macOS
    ),
    _sign(
        "connection-failed",
        N,
        "a connection could not be made",
        # The vaguest: after the precise connection signs. curl (and git over http, which uses it): "Failed to connect to h port 443 after
        # 0 ms: Couldn't connect to server" (the refusal's errno is not printed).
        r"couldn't connect to server",
        r"failed to connect to \S+ port \d+",
        r"could not create connection to \S+",
        r"^Connection error\b",
        *mechanisms.NETWORK_SAID,
    ),
    # A check or stage whose shell could not find the program it names: the machine or the
    # config lacks it, as when the runner cannot start the program at all. The status must
    # say so too: a test that prints the words is not missing anything.
    _sign(
        "command-not-found",
        C,
        "a program the command runs is not installed",
        r"^(?:\S*sh: )?(?:line \d+: |\d+: )?[^\s:]+: (?:command )?not found$",
        r"^\S*sh: command not found: \S+$",  # zsh
        needs_status=NOT_FOUND_STATUS,
    ),
)

# Lines that say the code failed (an assertion), whatever else the output says: met
# first, reading up from the end, they end the search with nothing recognised.
CODE_SIGNS: re.Pattern[str] = re.compile(
    "|".join(
        (
            r"\bAssertionError\b",
            r"^E\s+assert\b",  # pytest's rewritten assertion
            r"^FAILED \S+ - assert\b",  # pytest's short summary
            r"\bassertion (?:`[^`]*` )?failed\b",  # Rust's assert!/assert_eq!
            r"\bexpect\(received\)",  # jest
        )
    )
)
# Lines a compiler, type checker or linter prints about the code: they end the search too,
# but only when the same line carries no sign (``foo.c: fatal error: error writing
# /tmp/cc.s: No space left on device`` is the disk's). Without them, a retried download's
# "Connection refused" above a type error would make the type error the network's.
CODE_REPORTS: re.Pattern[str] = re.compile(
    "|".join(
        (
            r"^\S+?:\d+(?::\d+)?: (?:fatal )?error\b",  # mypy, gcc/clang, go
            r"^\S+?:\d+:\d+: \[?[A-Z]{1,3}\d{2,4}\b",  # flake8/ruff/pylint, located
            r"^[A-Z]{1,3}\d{2,4} (?:\[\*\] )?\S",  # ruff's own format
            r"^error\[E\d+\]",  # rustc
            r"\berror TS\d+\b",  # tsc
            r"^CONFLICT \(",  # git
            # A checker's tally of what it found in the code: ``lint: 3 problems``,
            # eslint's ``✖ 3 problems (3 errors, 0 warnings)``, ``Found 2 errors``,
            # rubocop's ``1 offense detected``, prettier's ``Code style issues found``.
            r"\b[1-9]\d* (?:problems?|offen[cs]es?|violations?)\b",
            r"^(?:\W+ )?Found [1-9]\d* errors?\b",
            r"\b(?:issues?|problems?|offen[cs]es?|violations?) (?:found|detected)\b",
        )
    )
)
# What reading a failed program's lines ended on: a sign, the code, or nothing either way.
CODE: Final = "code"


@dataclass(frozen=True)
class _Gated:
    """One check (``CODE_SIGNS``, a sign's pattern, ``CODE_REPORTS``) behind gates. A
    pattern matches where one of its top-level alternatives does; on an ASCII line,
    lower-cased, an alternative in ``parts`` can match only where one of its words is
    (``literals.needed``), and ``rest`` holds the alternatives that have none."""

    pattern: re.Pattern[str]
    parts: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...]
    rest: re.Pattern[str] | None

    def search(self, line: str, low: str | None) -> bool:
        """Whether ``pattern`` matches ``line``. ``low``: ``line.lower()`` when the line is
        ASCII, "" when it is ASCII and holds none of the words, None when it is not ASCII
        (the pattern is run)."""
        if low is None:
            return self.pattern.search(line) is not None
        if low:
            for words, part in self.parts:
                if any(word in low for word in words) and part.search(line) is not None:
                    return True
        return self.rest is not None and self.rest.search(line) is not None


def _gated(pattern: re.Pattern[str]) -> _Gated:
    parts: list[tuple[tuple[str, ...], re.Pattern[str]]] = []
    rest: list[str] = []
    for alternative in alternatives(pattern.pattern):
        found = needed(alternative, pattern.flags)
        if found is None:
            rest.append(alternative)
        else:
            parts.append((tuple(sorted(found)), re.compile(alternative, pattern.flags)))
    return _Gated(
        pattern,
        tuple(parts),
        re.compile("|".join(rest), pattern.flags) if rest else None,
    )


@dataclass(frozen=True)
class _Gates:
    """Every check behind its gates, and the words the gates look for (``_gates``)."""

    code_signs: _Gated
    signs: tuple[tuple[Sign, _Gated], ...]
    code_reports: _Gated
    # The signs a line with none of the words may still show (with no words, only a rest).
    signs_with_rest: tuple[tuple[Sign, _Gated], ...]
    words: tuple[str, ...]
    # RE2 finds any of them in one pass over the line; ``re`` alone where RE2 is not
    # installed.
    any_word_re2: Any
    any_word: re.Pattern[str]


# Most lines a long log holds can match nothing here; on an ASCII line one search for the
# words every gated alternative needs says so, and then only the alternatives with no
# such words are run (the order of the checks is kept, so the same check decides).
# Made on the first line read, not on import: splitting and compiling some 230
# alternatives costs tens of milliseconds, which every process that imports the driver
# paid, and only one that reads a failure needs.
@functools.cache
def _gates() -> _Gates:
    code_signs = _gated(CODE_SIGNS)
    signs = tuple((sign, _gated(sign.pattern)) for sign in SIGNS)
    code_reports = _gated(CODE_REPORTS)
    words = tuple(
        sorted(
            {
                word
                for gated in (code_signs, code_reports, *(g for _, g in signs))
                for words, _ in gated.parts
                for word in words
            }
        )
    )
    return _Gates(
        code_signs=code_signs,
        signs=signs,
        code_reports=code_reports,
        signs_with_rest=tuple((sign, gated) for sign, gated in signs if gated.rest),
        words=words,
        any_word_re2=any_word(word.encode("ascii") for word in words),
        any_word=re.compile("|".join(map(re.escape, words))),
    )


_LAZY: Final = {
    "_CODE_SIGNS_GATED": "code_signs",
    "_SIGNS_GATED": "signs",
    "_CODE_REPORTS_GATED": "code_reports",
    "_SIGNS_WITH_REST": "signs_with_rest",
    "_WORDS": "words",
    "_ANY_WORD_RE2": "any_word_re2",
    "_ANY_WORD": "any_word",
}


def __getattr__(name: str) -> Any:
    """The gates under their old names (the gate's tests read them), made when first asked."""
    if name in _LAZY:
        return getattr(_gates(), _LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The characters beyond ASCII that ``re`` matches to an ASCII letter when it ignores case
# (its simple case folding, and its own equivalences of i and s): the gates' view spells
# each as that letter, so a word's absence from the view still rules a match out.
_ASCII_FOLDS: Final = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _gate_view(line: str) -> str | None:
    """What the gates read of ``line``: lower-cased (beyond ASCII, after ``_ASCII_FOLDS``),
    or "" when it holds none of their words (each gate then runs only its rest)."""
    low = line.lower() if line.isascii() else line.translate(_ASCII_FOLDS).lower()
    return low if _has_a_word(low) else ""


def _has_a_word(low: str) -> bool:
    """Whether the lower-cased line ``low`` holds one of the gates' (ASCII) words."""
    gates = _gates()
    if gates.any_word_re2 is None:
        return gates.any_word.search(low) is not None
    # Read as Latin-1 bytes: a word's ASCII bytes never match inside a longer character.
    data = low.encode("utf-8", "surrogatepass")
    return gates.any_word_re2.search(data, 0, len(data)) is not None


def tail_lines(text: str, *, max_lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last ``max_lines`` lines within the last ``max_bytes`` characters' worth of
    UTF-8 (a partial first line is dropped when the text was cut)."""
    data = text.encode("utf-8", "replace")
    cut = len(data) > max_bytes
    window = data[-max_bytes:].decode("utf-8", "replace") if cut else text
    lines = window.splitlines()
    if cut and lines:
        lines = lines[1:]
    return lines[-max_lines:]


def recognise(
    output: str,
    *,
    exit_code: int | None,
    timed_out: bool,
    max_lines: int = TAIL_LINES,
    max_bytes: int = TAIL_BYTES,
) -> Recognised | None:
    """The infrastructure sign a failed program's output ends with, or None (a failure
    of the code, or one we cannot name). Pure; reads only the bounded tail."""
    found = read_up(
        reversed(tail_lines(output, max_lines=max_lines, max_bytes=max_bytes)),
        exit_code=exit_code,
        timed_out=timed_out,
    )
    return found if isinstance(found, Recognised) else None


# A GitHub Actions annotation, as a tool prints its finding for a workflow:
# ``::error file=app.py,line=3::app.py:3:8: F401 ...``; its message is the tool's line.
_ANNOTATION: Final = re.compile(r"::(?:error|warning|notice)(?: [^\n]*?)?::")


def read_up(
    lines: Iterable[str], *, exit_code: int | None, timed_out: bool
) -> Recognised | Literal["code"] | None:
    """Read ``lines`` (last first) until one decides: an infrastructure sign, ``CODE``
    (an assertion, or a report about the code with no sign beside it), or None when no
    line said either — the caller may then look further up the log. A sign that may be
    a symptom (``Sign.symptom``) decides only when the ``SYMPTOM_LINES`` lines above it
    hold no other sign (which then decides: its cause) before a line about the code.
    Pure."""
    if timed_out:
        return CODE  # our timeout stopped it: that is ``timeout``, told apart by the caller
    decide = line_decider(exit_code=exit_code, killed=exit_code == KILLED_STATUS)
    return read_lines_up(((-i, line) for i, line in enumerate(lines)), decide)


Decision = Recognised | Literal["code"] | None


def line_decider(*, exit_code: int | None, killed: bool) -> Callable[[str], Decision]:
    """What one line decides on its own, for a program that ended with ``exit_code``:
    an assertion (``CODE``), else the first sign in table order, else a report about
    the code (``CODE``), else None."""
    gates = _gates()

    def decide(line: str) -> Decision:
        stripped = stripped_line(line)
        if not stripped:
            return None
        low = _gate_view(stripped)
        if gates.code_signs.search(stripped, low):
            return CODE
        for sign, gated in gates.signs if low != "" else gates.signs_with_rest:
            if sign.needs_status is not None and exit_code != sign.needs_status:
                continue
            if sign.needs_kill and not killed:
                continue
            if gated.search(stripped, low) and not excepted(sign, stripped):
                return Recognised(sign, _one_line(stripped))
        if gates.code_reports.search(stripped, low):
            return CODE
        return None

    return decide


def stripped_line(line: str) -> str:
    """A line as a reader sees it: no colours, after a CI runner's or build tool's
    prefix, and a workflow annotation's message as the tool's own line."""
    stripped = without_prefix(plain(line).strip()).strip()
    if stripped.startswith("::") and (note := _ANNOTATION.match(stripped)) is not None:
        stripped = stripped[note.end() :].strip()
    return stripped


def excepted(sign: Sign, line: str) -> bool:
    """Whether ``line`` is one the sign leaves alone (``Sign.unless``)."""
    return sign.unless is not None and sign.unless.search(line) is not None


def read_lines_up(
    numbered: Iterable[tuple[int, str]], decide: Callable[[str], Decision]
) -> Decision:
    """The first of the ``numbered`` lines (last first, each with its line number) that
    ``decide`` decides; but a symptom's cause within ``SYMPTOM_LINES`` lines above it
    first (``read_up``). Lines that decide nothing may be left out. Pure."""
    symptom: Recognised | None = None
    symptom_at = 0
    for number, line in numbered:
        if symptom is not None and symptom_at - number > SYMPTOM_LINES:
            break
        found = decide(line)
        if found is None:
            continue
        if symptom is None:
            if isinstance(found, Recognised) and found.sign.symptom:
                symptom, symptom_at = found, number
                continue
            return found
        if found == CODE:
            break  # the code's line above it: the symptom stands as what was seen
        if not found.sign.symptom:
            return found  # its cause
    return symptom


def gate_words() -> list[str]:
    """Every word a gated alternative needs (lower-case): a line without one of them,
    ASCII, can match only the alternatives in ``rest_forms``."""
    return list(_gates().words)


def rest_forms() -> list[tuple[str, bool]]:
    """The alternatives that need no word (assertions, signs, reports about the code),
    each with whether it ignores case."""
    gates = _gates()
    checks = (gates.code_signs, *(gated for _, gated in gates.signs), gates.code_reports)
    return [
        (gated.rest.pattern, bool(gated.rest.flags & re.IGNORECASE))
        for gated in checks
        if gated.rest is not None
    ]


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LINE_MAX_CHARS else flat[: LINE_MAX_CHARS - 1] + "…"
