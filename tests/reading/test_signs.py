"""Exhausted resources and network failures told apart in a failed program's output: the
table of signs against real-looking lines (and real tool output, where it is cheap to
make offline), the tail window, and what wins when several lines say something."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.engines.base import FailureClass
from orchestrator.engines.classify import INFRA
from orchestrator.reading.failure import failure_named_in
from orchestrator.reading.signs import SIGNS, recognise

R, N = FailureClass.RESOURCE_EXHAUSTED, FailureClass.NETWORK
T, L, A, OUT = (
    FailureClass.TIMEOUT,
    FailureClass.RATE_LIMITED,
    FailureClass.AUTH_ERROR,
    FailureClass.OUTAGE,
)
C = FailureClass.CONFIG_ERROR

RECOGNISED = [
    # exhausted resources
    ("OSError: [Errno 28] No space left on device: '/tmp/out.bin'", 1, R, "disk-full"),
    ("cp: error writing 'big.iso': No space left on device", 1, R, "disk-full"),
    ("npm ERR! code ENOSPC", 1, R, "disk-full"),
    ("write /var/lib/docker/tmp/x: no space left on device", 1, R, "disk-full"),
    ("OSError: [Errno 122] Disk quota exceeded: 'build/lib'", 1, R, "disk-quota"),
    ("tar: out/a.o: Cannot write: Disk quota exceeded", 2, R, "disk-quota"),
    ("bash: fork: Cannot allocate memory", 1, R, "no-memory"),
    ("OSError: [Errno 12] Cannot allocate memory", 1, R, "no-memory"),
    ("g++: fatal error: Killed signal terminated program cc1plus", 1, R, "no-memory"),
    ("cc1plus: out of memory allocating 65536 bytes", 137, R, "oom-kill"),
    ("bash: line 1:  4242 Killed                  python train.py", 137, R, "oom-kill"),
    ("Killed", 137, R, "oom-kill"),
    ("/bin/sh: 1: Killed", 137, R, "oom-kill"),
    ("Memory cgroup out of memory: Killed process 4242 (python)", 137, R, "oom-kill"),
    ("MemoryError", 1, R, "no-memory"),
    ("E       MemoryError", 1, R, "no-memory"),
    # DNS
    (
        "fatal: unable to access 'https://git.example.invalid/x.git/': Could not resolve "
        "host: git.example.invalid",
        128, N, "dns",
    ),
    (
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
        1, N, "dns",
    ),
    ("npm ERR! request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org", 1, N, "dns"),
    ("ssh: Could not resolve hostname github.com: Name or service not known", 255, N, "dns"),
    ("go: github.com/a/b@v1.2.3: Get \"https://proxy.golang.org/github.com/a/b/@v/v1.2.3.mod\": dial tcp: lookup proxy.golang.org on 127.0.0.53:53: no such host", 1, N, "dns"),
    # connections
    (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError("
        "'<HTTPConnection object>: Failed to establish a new connection: [Errno 111] "
        "Connection refused')': /simple/x/",
        1, N, "connection-refused",
    ),
    ("Error: connect ECONNREFUSED 127.0.0.1:5432", 1, N, "connection-refused"),
    ("error: RPC failed; curl 56 Recv failure: Connection reset by peer", 128, N, "connection-reset"),
    ("curl: (7) Failed to connect to 10.0.0.1 port 443: Network is unreachable", 7, N, "network-unreachable"),
    ("ssh: connect to host 10.1.1.1 port 22: No route to host", 255, N, "network-unreachable"),
    ("fatal: unable to access 'http://127.0.0.1:9/x.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server", 128, N, "connection-failed"),
    ("curl: (7) Failed to connect to pypi.org port 443 after 2 ms: Couldn't connect to server", 7, N, "connection-failed"),
    ("pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='pypi.org', port=443): Read timed out.", 2, N, "connection-timeout"),
    # TLS
    (
        "requests.exceptions.SSLError: HTTPSConnectionPool(host='pypi.org', port=443): "
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local "
        "issuer certificate",
        1, N, "tls",
    ),
    ("Error response from daemon: Get \"https://registry-1.docker.io/v2/\": net/http: TLS handshake timeout", 1, N, "tls"),
    ("fatal: unable to access 'https://h/x.git/': server certificate verification failed. CAfile: none CRLfile: none", 128, N, "tls"),
    # a registry's 5xx or 429, in each tool's words
    ("ERROR: HTTP error 503 while getting https://files.pythonhosted.org/packages/x.whl", 1, OUT, "server-error"),
    ("HTTPError: 503 Server Error: Service Unavailable for url: https://pypi.org/simple/requests/", 1, OUT, "server-error"),
    ("npm ERR! code E503", 1, OUT, "server-error"),
    ("npm error code E429", 1, L, "rate-limited"),
    ("npm ERR! 502 Bad Gateway - GET https://registry.npmjs.org/left-pad", 1, OUT, "server-error"),
    (
        "  failed to get successful HTTP response from `https://index.crates.io/config.json` "
        "(108.138.64.68), got 503",
        101, OUT, "server-error",
    ),
    ("Error response from daemon: received unexpected HTTP status: 500 Internal Server Error", 1, OUT, "server-error"),
    # A 429 is a rate limit wherever it comes from (issue 25: its own class, not the network's).
    ("toomanyrequests: You have reached your pull rate limit.", 1, L, "rate-limited"),
    ("go: example.com/m@v1.0.0: reading https://proxy.golang.org/example.com/m/@v/v1.0.0.info: 429 Too Many Requests", 1, L, "rate-limited"),
    ("API rate limit exceeded for installation ID 1234.", 1, L, "rate-limited"),
    # Credentials, a job's time limit, a service that answered wrongly, an environment
    # that lacks what no code change gives.
    ("Error: No valid credential sources found", 1, A, "credentials"),
    ("fatal: could not read Username for 'https://github.com': terminal prompts disabled", 128, A, "credentials"),
    ("botocore.exceptions.NoCredentialsError: Unable to locate credentials", 1, A, "credentials"),
    ('The command "timeout 30m make check" exited with 124.', 1, T, "job-timeout"),
    ("No output has been received in the last 10m0s, this potentially indicates a stalled build", 1, T, "job-timeout"),
    ("Error: UPGRADE FAILED: timed out waiting for the condition", 1, T, "job-timeout"),
    ("TEST-UNEXPECTED-TIMEOUT | dom/tests/test_x.html | application timed out after 370 seconds with no output", 1, T, "job-timeout"),
    ("ERROR: no certificate subject alternative name matches requested host name 'example.org'.", 1, OUT, "service-broken"),
    ("E: Failed to fetch http://deb.example.org/ubuntu/dists/focal/main/binary-amd64/Packages  404  Not Found", 100, OUT, "service-broken"),
    ("No match for argument: pkgconfig(libfoo) >= 2.0", 1, C, "unresolvable-system-package"),
    ("E: Unable to locate package libfoo-dev", 100, C, "unresolvable-system-package"),
    ("  - nothing provides python3-foo >= 1.2 needed by bar-1.0-1.fc40.noarch", 1, C, "unresolvable-system-package"),
    ("xcodebuild: error: Unable to find a destination matching the provided destination specifier:", 70, C, "environment"),
    ("javax.net.ssl.SSLException: Received fatal alert: protocol_version", 1, C, "environment"),
    ("Connection error: Connect timeout at t/https.t line 17.", 1, N, "connection-timeout"),
    # a program the shell could not find (status 127)
    ("bash: line 1: eslint: command not found", 127, C, "command-not-found"),
    ("/bin/sh: 1: golangci-lint: not found", 127, C, "command-not-found"),
    ("zsh: command not found: tsc", 127, C, "command-not-found"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "exit_code", "failure", "sign"), RECOGNISED)
def test_a_real_looking_line_is_recognised(
    line: str, exit_code: int, failure: FailureClass, sign: str
) -> None:
    found = recognise(f"some ordinary output\n{line}\n", exit_code=exit_code, timed_out=False)
    assert found is not None, line
    assert (found.failure, found.sign.name) == (failure, sign)
    assert found.line == " ".join(line.split())
    assert found.detail() == f"{found.sign.what} [{sign}]: {found.line}"


NOT_RECOGNISED = [
    # a checker's tally of what it found ends the reading: a sign above it is not the cause
    ("bash: line 4: /state/x.json: Read-only file system\nlint: 3 problems", 1),
    (
        "fatal: unable to access 'https://x/': Could not resolve host: x\n\u2716 3 problems (3 errors, 0 warnings)",
        1,
    ),
    ("Connection refused\nFound 2 errors in 1 file (checked 3 source files)", 1),
    ("curl: (7) Failed to connect to x port 443\n1 file inspected, 1 offense detected", 1),
    # a bare status or size is not a registry's failure
    ("Downloading https://files.pythonhosted.org/packages/pkg-1.0-py3-none-any.whl (429 kB)", 1),
    ("FAILED tests/test_api.py::test_status - AssertionError: 503 Service Unavailable", 1),
    ("assert response.status_code == 200, got 503 Service Unavailable", 1),
    ("E   AssertionError: expected 'Connection refused' in output", 1),
    # "Killed" without a SIGKILL exit: the word, not the OOM killer
    ("bash: line 1:  4242 Killed                  python train.py", 1),
    ("Killed 3 mutants out of 4", 0),
    ("tests/test_x.py:12: error: Incompatible types in assignment", 1),
    ("ERROR: No matching distribution found for nosuchpackage", 1),
    ("error[E0308]: mismatched types", 101),
    # the words without the shell's status: a test's message, not a missing program
    ("bash: line 1: eslint: command not found", 1),
    ("E   AssertionError: 'tsc: command not found' not in output", 127),
    # MemoryError in prose, or a class named after it
    ("the loader raised a memoryerror once", 1),
    ("FAILED tests/test_load.py::test_big - pytest.raises(MemoryError) did not raise", 1),
]


@pytest.mark.parametrize(("line", "exit_code"), NOT_RECOGNISED)
def test_code_failures_and_look_alikes_are_not_recognised(line: str, exit_code: int) -> None:
    assert recognise(f"{line}\n", exit_code=exit_code, timed_out=False) is None


def test_coloured_lines_are_read_as_a_reader_sees_them() -> None:
    # A sign or a report about the code in colour decides as it does without.
    disk = "\x1b[1m\x1b[31mOSError: [Errno 28] No space left on device\x1b[0m\n"
    found = recognise(f"ordinary\n{disk}", exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "disk-full"
    assert found.line == "OSError: [Errno 28] No space left on device"
    assertion = "\x1b[1m\x1b[31mE       assert 3 == 4\x1b[0m"
    # Below a network line the assertion is the code's failure, coloured or not.
    named = failure_named_in(f"Connection refused\n{assertion}\n", exit_code=1, timed_out=False)
    assert named is None
    mypy = "app.py:3: \x1b[1m\x1b[31merror:\x1b(B\x1b[m Incompatible return value type"
    assert recognise(f"Connection refused\n{mypy}\n", exit_code=1, timed_out=False) is None


@pytest.mark.parametrize(
    "prefix",
    [
        "2026-12-01T02:53:12.1234567Z ",
        "#8 1.234 ",
        "[2026-12-01T02:53:12.123Z] ",
        "2026-12-01T02:53:12.123456Z 00E ",
        "test\tRun pytest\t2026-12-01T02:53:12.1234567Z ",  # gh run view --log
    ],
)
def test_lines_behind_a_ci_or_build_tool_prefix_are_read_after_it(prefix: str) -> None:
    # A test run inside ``docker build`` that hit a retried download, then an assertion:
    # the assertion decides for the code, as it does without the prefix.
    log = f"{prefix}WARNING: Connection refused (retrying)\n{prefix}E       assert 3 == 4\n"
    assert recognise(log, exit_code=1, timed_out=False) is None
    disk = recognise(f"{prefix}OSError: [Errno 28] No space left on device\n", exit_code=1,
                     timed_out=False)  # fmt: skip
    assert disk is not None and disk.sign.name == "disk-full"


def test_a_workflow_annotation_is_read_as_the_tools_own_line() -> None:
    # ruff --output-format=github below a retried download: the lint report decides for
    # the code, as the same report printed plainly does.
    lint = "::error title=ruff (F401),file=app.py,line=3,col=8::app.py:3:8: F401 `os` unused"
    log = f"WARNING: Connection refused (retrying)\n{lint}\n"
    assert recognise(log, exit_code=1, timed_out=False) is None
    disk = recognise("::error::OSError: [Errno 28] No space left on device\n", exit_code=1,
                     timed_out=False)  # fmt: skip
    assert disk is not None and disk.line == "OSError: [Errno 28] No space left on device"


def test_a_sigkill_with_the_words_is_not_an_oom_kill_when_our_timeout_sent_it() -> None:
    killed = "bash: line 1:  4242 Killed   python train.py\n"
    assert recognise(killed, exit_code=137, timed_out=False) is not None
    assert recognise(killed, exit_code=137, timed_out=True) is None
    assert recognise(killed, exit_code=124, timed_out=True) is None
    # A SIGKILL with nothing said is not called an OOM kill either.
    assert recognise("running train.py\n", exit_code=137, timed_out=False) is None


def test_an_assertion_after_an_earlier_network_line_is_the_codes_failure() -> None:
    pytest_output = (
        "tests/test_client.py::test_retry PASSED\n"
        "----- Captured log call -----\n"
        "WARNING  client: connect failed: [Errno 111] Connection refused (retrying)\n"
        "tests/test_client.py::test_total FAILED\n"
        "    def test_total():\n"
        ">       assert total([1, 2]) == 4\n"
        "E       assert 3 == 4\n"
        "FAILED tests/test_client.py::test_total - assert 3 == 4\n"
        "========================= 1 failed, 1 passed in 0.12s =========================\n"
    )
    assert recognise(pytest_output, exit_code=1, timed_out=False) is None


def test_a_report_about_the_code_below_an_earlier_network_line_is_the_codes_failure() -> None:
    # A retried download that then succeeded, and the type checker that failed after it.
    log = (
        "WARNING: Retrying (Retry(total=4)) after connection broken by "
        "'NewConnectionError(... [Errno 111] Connection refused)': /simple/attrs/\n"
        "Successfully installed attrs-23.2.0\n"
        'src/app.py:12: error: Incompatible return value type (got "str", expected "int")\n'
        "Found 1 error in 1 file (checked 3 source files)\n"
    )
    assert recognise(log, exit_code=1, timed_out=False) is None
    for report in (
        "src/app.py:3:8: F401 [*] `os` imported but unused",
        "F401 [*] `os` imported but unused",
        "error[E0425]: cannot find value `x` in this scope",
        "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.",
        "CONFLICT (content): Merge conflict in app.py",
    ):
        assert recognise(f"Connection refused\n{report}\n", exit_code=1, timed_out=False) is None
    # On one line a sign still wins over the report it is part of.
    gcc = "main.c:1: fatal error: error writing to /tmp/cc.s: No space left on device"
    found = recognise(f"{gcc}\n", exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "disk-full"


def test_the_last_sign_wins_and_only_the_tail_is_read() -> None:
    disk_then_dns = "No space left on device\nCould not resolve host: pypi.org\nexit 1\n"
    found = recognise(disk_then_dns, exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "dns"
    # A sign followed by more than the window of ordinary lines is out of reach.
    far = "OSError: [Errno 28] No space left on device\n" + "ordinary line\n" * 250
    assert recognise(far, exit_code=1, timed_out=False) is None
    assert recognise(far, exit_code=1, timed_out=False, max_lines=300) is not None
    # The byte bound holds too: a few long lines push it out.
    long_lines = "OSError: [Errno 28] No space left on device\n" + ("x" * 40_000 + "\n") * 2
    assert recognise(long_lines, exit_code=1, timed_out=False) is None


def test_on_one_line_the_precise_sign_comes_first() -> None:
    # pip's OSError while downloading: the disk, not the connection, stopped it.
    line = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device (while the connection was reset by peer)"
    found = recognise(line, exit_code=1, timed_out=False)
    assert found is not None and found.sign.name == "disk-full"


def test_every_sign_is_named_once_and_its_class_is_infrastructure() -> None:
    names = [s.name for s in SIGNS]
    assert len(names) == len(set(names))
    assert {s.failure for s in SIGNS} == {R, N, C, T, L, A, OUT}
    assert all(s.failure in INFRA for s in SIGNS)
    assert R in INFRA and N in INFRA and FailureClass.CODE not in INFRA


def test_the_programs_own_failure_class_line_wins_and_unknown_ones_are_ignored() -> None:
    said = "Connection refused\n::failure-class::rate_limited\n"
    named = failure_named_in(said, exit_code=1, timed_out=False)
    assert named is not None
    assert (named.failure, named.detail) == (FailureClass.RATE_LIMITED, None)
    # An unknown class is ignored, as for stages: the signs decide then.
    said = "::failure-class::cosmic_rays\nConnection refused\n"
    named = failure_named_in(said, exit_code=1, timed_out=False)
    assert named is not None and named.failure is N
    assert failure_named_in("::failure-class::cosmic_rays\n", exit_code=1, timed_out=False) is None


def test_the_runners_own_lines_are_not_read_for_signs() -> None:
    log = (
        "# orchestrator: started at 2026-01-01T00:00:00Z\n"
        "# $ curl https://pypi.org/simple/ -H 'x: 503 Service Unavailable'\n"
        "# orchestrator: exit 1 after 0.1s\n"
    )
    assert failure_named_in(log, exit_code=1, timed_out=False) is None


# ---- real tool output, made offline --------------------------------------------------


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(GIT_TERMINAL_PROMPT="0", PIP_CONFIG_FILE=os.devnull, LC_ALL="C")
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_real_git_clone_of_a_host_that_does_not_resolve(tmp_path: Path) -> None:
    done = _run(
        ["git", "-c", "http.lowSpeedTime=5", "clone", "https://host.invalid/x.git"], tmp_path
    )
    assert done.returncode != 0
    found = recognise(done.stdout + done.stderr, exit_code=done.returncode, timed_out=False)
    assert found is not None and (found.failure, found.sign.name) == (N, "dns"), done.stderr


@pytest.mark.slow
def test_real_pip_against_a_closed_port(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pip", "download", "--isolated", "--no-cache-dir"]
    argv += ["--retries", "1", "--timeout", "2", "--index-url", "http://127.0.0.1:1/", "x"]
    done = _run(argv, tmp_path)
    assert done.returncode != 0
    found = recognise(done.stdout + done.stderr, exit_code=done.returncode, timed_out=False)
    assert found is not None, done.stdout + done.stderr
    assert (found.failure, found.sign.name) == (N, "connection-refused")


def test_real_python_raising_enospc_and_a_real_sigkill_under_bash(tmp_path: Path) -> None:
    done = _run([sys.executable, "-c", "raise OSError(28, 'No space left on device')"], tmp_path)
    found = recognise(done.stderr, exit_code=done.returncode, timed_out=False)
    assert found is not None and (found.failure, found.sign.name) == (R, "disk-full")
    # The shell's report of a child killed by SIGKILL, and its 137 (an OOM kill looks so).
    killer = f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'"
    done = _run(["bash", "-c", f"{killer}; exit $?"], tmp_path)
    assert done.returncode == 137
    found = recognise(done.stderr, exit_code=done.returncode, timed_out=False)
    assert found is not None and (found.failure, found.sign.name) == (R, "oom-kill"), done.stderr
