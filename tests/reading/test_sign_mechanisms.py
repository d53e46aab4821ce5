"""Signs that name a mechanism, not a tool (issue 44): each sign on lines from the
development logs (``../shared/data/ci-logs``, quoted as found) and on lines written from
the tools' own documentation or source, code failures that mention the same words, the
symptom whose cause is read above it, and the bulk reading of a long stretch of log
(``reading.bulk``), which decides as ``read_up`` does."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.engines.base import FailureClass
from orchestrator.reading import bulk
from orchestrator.reading.failure import failure_of_output
from orchestrator.reading.signs import (
    _ASCII_FOLDS,
    CODE,
    SYMPTOM_LINES,
    read_up,
    recognise,
)

from conftest import examples

R, N, C = FailureClass.RESOURCE_EXHAUSTED, FailureClass.NETWORK, FailureClass.CONFIG_ERROR
T, L, A, OUT = (
    FailureClass.TIMEOUT,
    FailureClass.RATE_LIMITED,
    FailureClass.AUTH_ERROR,
    FailureClass.OUTAGE,
)

# (line, class, sign): lines quoted from the development logs (the case in a comment)
FROM_THE_LOGS = [
    # 71: Maven Resolver's words for an Artifactory 500
    ("Could not transfer artifact org.kohsuke.stapler:stapler:jar:2014.v1f888f8f0b_84 from/to repo.jenkins-ci.org (https://repo.jenkins-ci.org/public/): status code: 500, reason phrase:  (500)", OUT, "server-error"),
    # 83, 96: git over http (curl's CURLE_HTTP_RETURNED_ERROR)
    ("fatal: unable to access 'https://github.com/moovweb/gvm.git/': The requested URL returned error: 500", OUT, "server-error"),
    ("stderr: fatal: unable to access 'https://github.com/KTH/spork.git/': The requested URL returned error: 503", OUT, "server-error"),
    # 84: git's RPC failure
    ("error: RPC failed; HTTP 503 curl 22 The requested URL returned error: 503 Service Unavailable", OUT, "server-error"),
    # 73: a push refused
    ("fatal: unable to access 'https://github.com/simonw/datasette-paste-table/': The requested URL returned error: 403", A, "access-refused"),
    ("remote: Permission to simonw/datasette-paste-table.git denied to github-actions[bot].", A, "access-refused"),
    # 63: the OCI registry's DENIED
    ("denied: requested access to the resource is denied", A, "access-refused"),
    # 64: V8's own report
    ("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", R, "runtime-out-of-memory"),
    # 79, 85, 105: a whole run's time limit
    ("panic: test timed out after 10m0s", T, "job-timeout"),
    ("Build timed out (after 120 minutes). Marking the build as aborted.", T, "job-timeout"),
    ("[2016-09-08 11:25.31] Failed: Exceeded timeout of 60 minutes", T, "job-timeout"),
    # 82, 93, 74, 114: a toolchain the machine lacks
    ("==> Error: No compilers found for operating system sierra and target x86_64.", C, "missing-toolchain"),
    ("ERROR: No acceptable C compiler found!", C, "missing-toolchain"),
    ("Error: Version 3.6 with arch x64 not found", C, "missing-toolchain"),
    ("c/tools.c:24:10: fatal error: Python.h: No such file or directory", C, "missing-toolchain"),
    # 65: Wine's ERROR_BAD_EXE_FORMAT
    ("wine: Bad EXE format for Z:\\bin\\sh..", C, "exec-format"),
    # 113: rootless buildah without subordinate ids
    ('Found no UID ranges set aside for user "josh" in /etc/subuid.', C, "environment"),
    # 66: cargo's own word that it was the network
    ("warning: spurious network error (2 tries remaining): bad packet length; class=Net (12)", N, "connection-failed"),
    # 103: Java's SocketException
    ("Failed to fetch Maven dependency: Could not transfer artifact com.google.inject:guice:jar:4.0 from/to com_google_inject_guice (http://central.maven.org/maven2/): Connection reset", N, "connection-reset"),
    # 78: apt's words for EAI_AGAIN
    ("W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/xenial/InRelease  Temporary failure resolving 'archive.ubuntu.com'", N, "dns"),
]  # fmt: skip

# (line, class, sign): lines written from the tools' documentation or source
FROM_THE_DOCS = [
    # HTTP status families, each client's wording
    ("curl: (22) The requested URL returned error: 502", OUT, "server-error"),
    ("[ERROR] Failed to execute goal on project app: Could not resolve dependencies: Could not transfer artifact a:b:jar:1.0 from/to central (https://repo.example.org/maven2): status code: 503, reason phrase: Service Unavailable (503)", OUT, "server-error"),
    ("> Could not GET 'https://repo.example.org/a/b/1.0/b-1.0.pom'. Received status code 502 from server: Bad Gateway", OUT, "server-error"),
    ("java.io.IOException: Server returned HTTP response code: 503 for URL: https://repo.example.org/x.jar", OUT, "server-error"),
    ("urllib.error.HTTPError: HTTP Error 504: Gateway Time-out", OUT, "server-error"),
    ("2026-12-01 02:53:12 ERROR 503: Service Unavailable.", OUT, "server-error"),
    ("##[error]Response status code does not indicate success: 500 (Internal Server Error).", OUT, "server-error"),
    ("Error: Request failed with status code 502", OUT, "server-error"),
    ("go: example.com/m@v1.0.0: reading https://proxy.golang.org/example.com/m/@v/v1.0.0.info: 502 Bad Gateway", OUT, "server-error"),
    ("CondaHTTPError: HTTP 502 BAD GATEWAY for url <https://conda.example.org/main/linux-64/repodata.json>", OUT, "server-error"),
    ("npm error code E503", OUT, "server-error"),
    ("curl: (22) The requested URL returned error: 429", L, "rate-limited"),
    ("> Could not GET 'https://repo.example.org/x.pom'. Received status code 429 from server: Too Many Requests", L, "rate-limited"),
    ("[ERROR] Failed to deploy artifacts: Could not transfer artifact a:b:jar:1.0 from/to releases (https://repo.example.org/): status code: 401, reason phrase: Unauthorized (401)", A, "credentials"),
    ("> Could not GET 'https://repo.example.org/x.pom'. Received status code 403 from server: Forbidden", A, "access-refused"),
    ("[ERROR] Failed to deploy: Return code is: 403, ReasonPhrase: Forbidden.", A, "access-refused"),
    ("unauthorized: authentication required", A, "credentials"),
    ("remote: HTTP Basic: Access denied", A, "access-refused"),
    ("npm ERR! code E403", A, "access-refused"),
    # a runtime's own out-of-memory report
    ("FATAL ERROR: CALL_AND_RETRY_LAST Allocation failed - JavaScript heap out of memory", R, "runtime-out-of-memory"),
    ('Exception in thread "main" java.lang.OutOfMemoryError: Java heap space', R, "runtime-out-of-memory"),
    ("java.lang.OutOfMemoryError: GC overhead limit exceeded", R, "runtime-out-of-memory"),
    ("# There is insufficient memory for the Java Runtime Environment to continue.", R, "runtime-out-of-memory"),
    ("fatal error: runtime: out of memory", R, "runtime-out-of-memory"),
    ("memory allocation of 1073741824 bytes failed", R, "runtime-out-of-memory"),
    ("Unhandled exception. System.OutOfMemoryException: Exception of type 'System.OutOfMemoryException' was thrown.", R, "runtime-out-of-memory"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", R, "runtime-out-of-memory"),
    ("ghc: out of memory (requested 1048576 bytes)", R, "runtime-out-of-memory"),
    # a job's time limit: the CI's, or a runner's on the whole run
    ("ERROR: Job failed: execution took longer than 1h0m0s seconds", T, "job-timeout"),
    ("##[error]The job running on agent Hosted Agent ran longer than the maximum time of 60 minutes.", T, "job-timeout"),
    ("The job running on runner GitHub Actions 2 has exceeded the maximum execution time of 360 minutes.", T, "job-timeout"),
    ("Too long with no output (exceeded 10m0s): context deadline exceeded", T, "job-timeout"),
    ("Cancelling nested steps due to timeout", T, "job-timeout"),
    ("##[error]The action has timed out.", T, "job-timeout"),
    ("No output has been received in the last 10m0s, this potentially indicates a stalled build or something wrong with the build itself.", T, "job-timeout"),
    # a toolchain the machine lacks
    ("configure: error: C compiler cannot create executables", C, "missing-toolchain"),
    ("configure: error: no acceptable C compiler found in $PATH", C, "missing-toolchain"),
    ("-- No CMAKE_CXX_COMPILER could be found.", C, "missing-toolchain"),
    ("error: linker `cc` not found", C, "missing-toolchain"),
    ("Error: Unable to find Node version '99' for platform linux and architecture x64.", C, "missing-toolchain"),
    ("Error: The version '3.6' with architecture 'x64' was not found for Ubuntu 22.04.", C, "missing-toolchain"),
    ("error: Microsoft Visual C++ 14.0 or greater is required.", C, "missing-toolchain"),
    ("ext/foo.c:1:10: fatal error: ruby.h: No such file or directory", C, "missing-toolchain"),
    # a binary the machine cannot run
    ("/bin/sh: ./tool: cannot execute binary file: Exec format error", C, "exec-format"),
    ("exec /usr/local/bin/docker-entrypoint.sh: exec format error", C, "exec-format"),
    ("The specified executable is not a valid application for this OS platform. %1 is not a valid Win32 application.", C, "exec-format"),
    # rootless containers
    ("Error: writing blob: adding layer: potentially insufficient UIDs or GIDs available in user namespace (requested 0:42 for /etc/gshadow)", C, "environment"),
    ('cannot find UID/GID for user runner: no subuid ranges found for user "runner" in /etc/subuid', C, "environment"),
    ("xcrun: error: invalid active developer path (/Library/Developer/CommandLineTools), missing xcrun at: /Library/Developer/CommandLineTools/usr/bin/xcrun", C, "missing-toolchain"),
    ("ERROR: JAVA_HOME is not set and no 'java' command could be found in your PATH.", C, "missing-toolchain"),
    ("error: toolchain 'nightly-2020-01-01-x86_64-unknown-linux-gnu' is not installed", C, "missing-toolchain"),
    ("pyenv: version `3.9.1' is not installed (set by /home/runner/work/app/.python-version)", C, "missing-toolchain"),
    # a container engine the machine does not run
    ("docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", C, "environment"),
    ("permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock", C, "environment"),
    # a forge refusing the credentials git sent
    ("remote: Invalid username or password.", A, "credentials"),
    # the network, in a tool's or the C library's words
    ("java.net.SocketException: Connection reset", N, "connection-reset"),
    ("curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received", N, "connection-timeout"),
    ("fatal: unable to access 'https://h/x/': Could not resolve host: h", N, "dns"),
    ("wget: bad address 'h.example.org': Name does not resolve", N, "dns"),
    ("npm ERR! network socket hang up", N, "connection-failed"),
    ("requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))", N, "connection-failed"),
    ("fatal: unable to access 'https://h/x.git/': OpenSSL SSL_read: SSL_ERROR_SYSCALL, errno 104", N, "connection-failed"),
    ('go: example.com/m@v1.0.0: Get "https://proxy.golang.org/example.com/m/@v/v1.0.0.mod": dial tcp 142.250.1.1:443: i/o timeout', N, "connection-failed"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "failure", "sign"), FROM_THE_LOGS + FROM_THE_DOCS)
def test_a_mechanism_is_recognised_with_the_line_that_decided(
    line: str, failure: FailureClass, sign: str
) -> None:
    found = recognise(f"ordinary output\n{line}\nexit 1\n", exit_code=1, timed_out=False)
    assert found is not None, line
    assert (found.failure, found.sign.name) == (failure, sign), line
    assert " ".join(line.split()).endswith(found.line)  # after a CI's or tool's prefix
    assert found.detail().endswith(f"[{sign}]: {found.line}")


# Code failures and ordinary lines that mention the same words: none is infrastructure.
NOT_INFRASTRUCTURE = [
    # a status in a test's own words, or from a server the check started on the loopback
    "assert response.status_code == 200, got 503 Service Unavailable",
    "expected 200 OK but the app answered 500 Internal Server Error",
    "requests.exceptions.HTTPError: 500 Server Error: INTERNAL SERVER ERROR for url: http://localhost:5000/api",
    "curl: (22) The requested URL returned error: 503 (http://127.0.0.1:8080/health)",
    "Error: Request failed with status code 500 at http://localhost:3000/api/items",
    # a 404 decides nothing: a stale URL and a cache probe look the same
    "curl: (22) The requested URL returned error: 404 Not Found",
    "npm ERR! code E404",
    # a single test's own timeout is the code's
    'thrown: "Exceeded timeout of 5000 ms for a test.',
    'Error: Timeout of 2000ms exceeded. For async tests and hooks, ensure "done()" is called',
    "page.goto: Navigation timed out after 30000ms",
    # a project's own missing header is the code's
    "src/app.c:3:10: fatal error: app/config.h: No such file or directory",
    # memory words that are not a runtime's report
    "test_out_of_memory_handling PASSED",
    "FAILED tests/test_alloc.py::test_limit - AssertionError: expected OutOfMemoryError",
    # a compiler named, not missing
    "-- The C compiler identification is GNU 12.2.0",
    "-- Check for working C compiler: /usr/bin/cc - skipped",
    # the words of a permission, not a service's refusal
    "bash: ./deploy.sh: Permission denied",
    # an application's own log of the page it rendered
    "22:04:05.115 [main] ERROR com.example.front.ErrorView - Error 500",
    # a parser's token is not a credential
    "SyntaxError: invalid token",
    "WARNING: CSS error: 'style.css' [26:15] Error in style rule. (Invalid token \"(\".",
]


@pytest.mark.parametrize("line", NOT_INFRASTRUCTURE)
def test_code_failures_that_mention_the_words_are_not_infrastructure(line: str) -> None:
    assert recognise(f"{line}\n", exit_code=1, timed_out=False) is None, line


def test_a_connections_own_timeout_is_the_networks_not_the_jobs() -> None:
    line = "ssh: connect to host example.org port 22: Connection timed out after 120 seconds"
    found = recognise(f"{line}\n", exit_code=255, timed_out=False)
    assert found is not None and (found.failure, found.sign.name) == (N, "connection-timeout")


# ---- a symptom and its cause above it --------------------------------------------------

APT_WITHOUT_DNS = (
    "W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/xenial/InRelease  "
    "Temporary failure resolving 'archive.ubuntu.com'\n"
    "W: Some index files failed to download. They have been ignored, or old ones used instead.\n"
    "Reading package lists...\n"
    "Building dependency tree...\n"
    "Reading state information...\n"
    "E: Unable to locate package software-properties-common\n"
    "The command '/bin/sh -c apt-get install -y software-properties-common' returned a "
    "non-zero code: 100\n"
)


def test_a_package_not_found_after_its_index_failed_to_download_is_the_networks() -> None:
    found = recognise(APT_WITHOUT_DNS, exit_code=1, timed_out=False)
    assert found is not None and (found.failure, found.sign.name) == (N, "dns")
    assert "Temporary failure resolving" in found.line


def test_a_symptom_with_no_cause_above_it_decides_as_itself() -> None:
    alone = "Reading package lists...\nE: Unable to locate package libfoo-dev\n"
    found = recognise(alone, exit_code=100, timed_out=False)
    assert found is not None and found.sign.name == "unresolvable-system-package"
    # A cause further up than the look-up reaches is not its cause.
    far = (
        "W: Failed to fetch http://h/InRelease  Temporary failure resolving 'h'\n"
        + "ordinary\n" * (SYMPTOM_LINES + 1)
        + "E: Unable to locate package libfoo-dev\n"
    )
    found = recognise(far, exit_code=100, timed_out=False, max_lines=SYMPTOM_LINES + 10)
    assert found is not None and found.sign.name == "unresolvable-system-package"
    # Nor is a sign above a line about the code: that line is the earlier failure.
    code_between = (
        "W: Failed to fetch http://h/InRelease  Temporary failure resolving 'h'\n"
        "src/app.py:3: error: Name 'x' is not defined\n"
        "E: Unable to locate package libfoo-dev\n"
    )
    found = recognise(code_between, exit_code=100, timed_out=False)
    assert found is not None and found.sign.name == "unresolvable-system-package"


def test_a_missing_compiler_after_its_download_failed_is_the_networks() -> None:
    log = (
        "E: Failed to fetch http://deb.example.org/pool/g/gcc.deb  Connection refused\n"
        "E: Unable to fetch some archives, maybe run apt-get update\n"
        "checking for gcc... no\n"
        "configure: error: no acceptable C compiler found in $PATH\n"
    )
    found = recognise(log, exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "connection-refused"


# ---- the gates beyond ASCII --------------------------------------------------------------


def test_the_gates_spell_every_character_re_folds_onto_an_ascii_letter() -> None:
    """``_ASCII_FOLDS`` is complete: every character beyond ASCII that ``re`` matches to
    an ASCII letter when it ignores case is in it, or lower-cases to that letter."""
    everything = "".join(map(chr, range(0x80, sys.maxunicode + 1)))
    folded = set(re.findall(r"[a-z]", everything, re.IGNORECASE))
    assert folded  # the Kelvin sign, the long s, the dotted and dotless i
    for char in folded:
        view = char.translate(_ASCII_FOLDS).lower()
        assert len(view) == 1 and view.isascii(), (hex(ord(char)), view)


def test_a_sign_spelt_with_a_folded_letter_is_still_recognised() -> None:
    found = recognise("No ſpace left on device\n", exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "disk-full"
    found = recognise("✗ conNectıon refused\n", exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "connection-refused"


# ---- the bulk reading: the same decision over every line -----------------------------

_LINES = st.sampled_from(
    [
        "ordinary progress line 42",
        "tests/test_x.py::test_y PASSED",
        "E       assert 3 == 4",
        "src/a.py:3: error: Incompatible types",
        "F401 [*] `os` imported but unused",
        "No space left on device",
        "Connection refused",
        "E: Unable to locate package libfoo-dev",
        "W: Failed to fetch http://h/x  Temporary failure resolving 'h'",
        "panic: test timed out after 10m0s",
        "bash: line 1: 4242 Killed   python x.py",
        "bash: line 1: eslint: command not found",
        "\x1b[31mFATAL ERROR: Reached heap limit\x1b[0m",
        "2026-12-01T02:53:12.1234567Z curl: (22) The requested URL returned error: 503",
        "progress 10%\rprogress 100%\rConnection reset by peer",
        "naïve ſpace: No ſpace left on device",
        "# orchestrator: exit 1 after 0.1s",
        "a\x0cform feed then Connection refused",
        "",
        "   ",
        "ERROR 503: Service Unavailable.",
        "line with CRLF\r",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_LINES, max_size=40),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.sampled_from([1, 127, 137]),
    st.integers(min_value=8, max_value=200),
)
def test_the_bulk_reading_decides_as_read_up(
    lines: list[str], newline: str, final_newline: bool, status: int, chunk: int
) -> None:
    text = newline.join(lines) + (newline if final_newline and lines else "")
    data = text.encode("utf-8")
    expected = read_up(reversed(text.splitlines()), exit_code=status, timed_out=False)
    found = bulk.read_up_bytes(data, exit_code=status, timed_out=False, chunk_bytes=chunk)
    assert found == expected


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_LINES, max_size=30), st.integers(min_value=4, max_value=120))
def test_a_file_read_in_stretches_is_read_whole(lines: list[str], chunk: int) -> None:
    data = "\n".join(lines).encode("utf-8")
    stretches = [
        buffer[begin:end]
        for buffer, begin, end in bulk.file_stretches(
            io.BytesIO(data), 0, len(data), chunk_bytes=chunk
        )
    ]
    assert b"".join(reversed(stretches)) == data
    assert all(s.endswith(b"\n") for s in stretches[1:])
    # and read as the whole is
    found = bulk.read_up_stretches(
        bulk.file_stretches(io.BytesIO(data), 0, len(data), chunk_bytes=chunk),
        exit_code=1,
        timed_out=False,
    )
    assert found == read_up(reversed(data.decode().splitlines()), exit_code=1, timed_out=False)


def test_the_bulk_reading_skips_the_runners_own_lines() -> None:
    data = b"# $ curl https://h -H 'x: 503 Service Unavailable'\nok\n"
    assert bulk.read_up_bytes(data, exit_code=1, timed_out=False) == (
        bulk.read_up_bytes(data, exit_code=1, timed_out=False)
    )
    assert bulk.read_up_bytes(data, exit_code=1, timed_out=False, ignore=("# $ ",)) is None
    assert bulk.read_up_bytes(b"E   assert 1 == 2\n", exit_code=1, timed_out=True) == CODE


# ---- a failed check's log: its last words below its last root-cause line ---------------


def test_a_ci_time_limit_far_below_the_last_error_line_is_read(tmp_path: Path) -> None:
    """The CI's own last words, under more ordinary output than the tail holds, below
    the log's lowest root-cause line: read (the tail alone missed them)."""
    log = tmp_path / "check.log"
    log.write_text(
        "[ERROR] some earlier failure line\n"
        + "Running com.example.SomeTest\n"
        + "No output has been received in the last 10m0s, this potentially indicates a "
        "stalled build or something wrong with the build itself.\n"
        + "".join(f"progress line {i} of the cleanup\n" for i in range(3000))
    )
    named = failure_of_output(log, exit_code=1, timed_out=False)
    assert named is not None and named.failure is T
    assert named.detail is not None and "[job-timeout]" in named.detail


def test_an_early_sign_above_an_unrelated_failure_is_still_not_read(tmp_path: Path) -> None:
    """Above the lowest root-cause line only the regions around root-cause lines are
    read, as before: a retried download a megabyte above the failure is not its cause."""
    log = tmp_path / "check.log"
    log.write_text(
        "WARNING: Retrying after Connection refused: /simple/attrs/\n"
        + "".join(f"tests/test_m.py::test_{i} PASSED\n" for i in range(40_000))
        + "FAILED tests/test_m.py::test_total - assert 3 == 4\n"
        + "".join(f"cleanup line {i}\n" for i in range(300))
    )
    assert failure_of_output(log, exit_code=1, timed_out=False) is None
