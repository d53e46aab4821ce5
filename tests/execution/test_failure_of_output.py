"""What a failed stage or check's log names, read from the log file as the runner wrote
it: the class, and a detail that never carries a secret the output printed."""

from __future__ import annotations

from pathlib import Path

from orchestrator.engines.base import FailureClass
from orchestrator.reading.failure import failure_of_output

TOKEN = "ghp_0123456789abcdefABCDEF0123456789abcd"


def test_the_recognised_line_is_redacted_before_it_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "003-review-fetch.log"
    log.write_text(
        "# orchestrator: 2026-01-01T00:00:00+00:00 cwd=/clone\n"
        "# $ git fetch\n"
        f"fatal: unable to access 'https://bob:{TOKEN}@github.com/x.git/': Could not resolve "
        "host: github.com\n"
        "# orchestrator: exit 128 after 0.2s\n"
    )
    named = failure_of_output(log, exit_code=128, timed_out=False)
    assert named is not None and named.failure is FailureClass.NETWORK
    assert named.detail is not None
    assert TOKEN not in named.detail and "[REDACTED]" in named.detail
    assert named.detail.endswith("Could not resolve host: github.com")


def test_a_missing_log_names_nothing_and_a_timeout_is_not_read(tmp_path: Path) -> None:
    assert failure_of_output(tmp_path / "gone.log", exit_code=1, timed_out=False) is None
    log = tmp_path / "x.log"
    log.write_text("bash: line 1: 77 Killed   python big.py\n")
    assert failure_of_output(log, exit_code=137, timed_out=True) is None
    named = failure_of_output(log, exit_code=137, timed_out=False)
    assert named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED


# ---- a long log: the failure, then megabytes of ordinary output ------------------------

PADDING = "".join(
    f"src/pkg/module_{i % 400:03d}.py        120     4    96%\n" for i in range(30_000)
)
HEADER = "# orchestrator: 2026-01-01T00:00:00+00:00 cwd=/clone\n# $ ./ci.sh\n"
FOOTER = "# orchestrator: exit {code} after 9.1s\n"


def _long_log(tmp_path: Path, failure: str, *, code: int = 1, after: str = PADDING) -> Path:
    log = tmp_path / "004-review-ci.log"
    log.write_text(HEADER + PADDING + failure + after + FOOTER.format(code=code))
    assert log.stat().st_size > 2 * 1024 * 1024  # far more than the 64 KiB tail
    return log


def test_a_sign_a_megabyte_above_the_end_is_found_around_its_root_cause_line(
    tmp_path: Path,
) -> None:
    # pip retried against a dead index, then gave up; the job printed its coverage after.
    failure = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError("
        "'<HTTPConnection object>: Failed to establish a new connection: [Errno 111] "
        "Connection refused')': /simple/attrs/\n"
        "ERROR: Could not find a version that satisfies the requirement attrs (from versions: none)\n"
        "ERROR: No matching distribution found for attrs\n"
    )
    named = failure_of_output(_long_log(tmp_path, failure), exit_code=1, timed_out=False)
    assert named is not None and named.failure is FailureClass.NETWORK
    assert named.detail is not None and "Connection refused" in named.detail


def test_far_up_a_python_traceback_names_the_full_disk_and_the_oom_kill_needs_its_status(
    tmp_path: Path,
) -> None:
    failure = (
        "Traceback (most recent call last):\n"
        '  File "dump.py", line 2, in <module>\n'
        "OSError: [Errno 28] No space left on device\n"
    )
    named = failure_of_output(_long_log(tmp_path, failure), exit_code=1, timed_out=False)
    assert named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED
    killed = "bash: line 1:  7155 Killed                  python train.py\n"
    log = _long_log(tmp_path, killed, code=137)
    named = failure_of_output(log, exit_code=137, timed_out=False)
    assert named is not None and named.failure is FailureClass.RESOURCE_EXHAUSTED
    assert failure_of_output(log, exit_code=1, timed_out=False) is None


def test_far_up_the_codes_own_failure_below_a_network_line_stays_the_codes(
    tmp_path: Path,
) -> None:
    failure = (
        "WARNING  client: connect failed: [Errno 111] Connection refused (retrying)\n"
        'src/app.py:12: error: Incompatible return value type (got "str", expected "int")\n'
        "Found 1 error in 1 file (checked 3 source files)\n"
    )
    assert failure_of_output(_long_log(tmp_path, failure), exit_code=1, timed_out=False) is None
    # An assertion far below the sign: the code's, even with megabytes between them.
    far = "Could not resolve host: pypi.org\n" + PADDING + "E       assert 3 == 4\n"
    assert failure_of_output(_long_log(tmp_path, far), exit_code=1, timed_out=False) is None


def test_far_up_the_programs_own_failure_class_line_counts(tmp_path: Path) -> None:
    failure = "forge answered 503 Service Unavailable\n::failure-class::outage\n"
    named = failure_of_output(_long_log(tmp_path, failure), exit_code=1, timed_out=False)
    assert named is not None
    assert (named.failure, named.detail) == (FailureClass.OUTAGE, None)
    # An unknown class names nothing, here as in the tail.
    unknown = "::failure-class::cosmic_rays\n"
    assert failure_of_output(_long_log(tmp_path, unknown), exit_code=1, timed_out=False) is None


def test_a_failure_class_line_counts_behind_a_prefix_or_in_colour_and_only_at_a_line_start(
    tmp_path: Path,
) -> None:
    # Printed by a step inside ``docker build``, under a CI timestamp, or in colour: the
    # same line to a reader, near the end or a megabyte up.
    for line in (
        "#8 1.234 ::failure-class::outage",
        "2026-12-01T02:53:12.1234567Z ::failure-class::outage",
        "2026-12-01T02:53:12.123456Z 00O ::failure-class::outage",  # GitLab's runner
        "\x1b[33m::failure-class::outage\x1b[0m",
    ):
        far = _long_log(tmp_path, f"forge answered 503\n{line}\n")
        named = failure_of_output(far, exit_code=1, timed_out=False)
        assert named is not None and named.failure is FailureClass.OUTAGE, line
        near = tmp_path / "005-review-ci.log"
        near.write_text(HEADER + f"forge answered 503\n{line}\n" + FOOTER.format(code=1))
        named = failure_of_output(near, exit_code=1, timed_out=False)
        assert named is not None and named.failure is FailureClass.OUTAGE, line
    # The marker quoted inside a line (a script that prints its own source) is not one,
    # however many times, and the real line above it still counts.
    quoted = "+ echo 'on error print ::failure-class::network' ::failure-class::network\n" * 3
    log = _long_log(tmp_path, "::failure-class::outage\n" + quoted)
    named = failure_of_output(log, exit_code=1, timed_out=False)
    assert named is not None and named.failure is FailureClass.OUTAGE
    assert failure_of_output(_long_log(tmp_path, quoted), exit_code=1, timed_out=False) is None


def test_nothing_is_read_beyond_the_scan_window(tmp_path: Path) -> None:
    failure = "OSError: [Errno 28] No space left on device\n"
    log = _long_log(tmp_path, failure)
    assert failure_of_output(log, exit_code=1, timed_out=False) is not None
    # The window is the last 1 MiB: the sign lies above it.
    window = 1024 * 1024
    assert failure_of_output(log, exit_code=1, timed_out=False, scan_bytes=window) is None
    marker = _long_log(tmp_path, "::failure-class::outage\n")
    assert failure_of_output(marker, exit_code=1, timed_out=False, scan_bytes=window) is None
