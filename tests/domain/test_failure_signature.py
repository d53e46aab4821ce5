"""A failure's signature (issue 44): what varies between runs of the same failure is
masked, so a template line filled in with other numbers, durations, hashes, UUIDs,
timestamps, hosts, URLs, absolute paths and versions gives the same signature; what names
the failure is kept, so another word, another error code or another relative file gives a
different one. Properties over generated values, and examples from the development logs
(``../shared/data/ci-logs``)."""

from __future__ import annotations

import hashlib
import json
import string
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.domain.failure_signature import (
    MAX_LINE_CHARS,
    MAX_LINES,
    FailureSignature,
    mask,
    signature_of,
)

from conftest import examples

CI_LOGS = Path(__file__).resolve().parents[3] / "shared" / "data" / "ci-logs"
SETTINGS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def sig(*lines: str) -> FailureSignature:
    return signature_of("build", "project-tests", "code", lines)


# --------------------------------------------------------------------------- what varies

numbers = st.integers(min_value=0, max_value=10**12).map(str)
durations = st.one_of(
    st.builds(lambda s, f: f"{s}.{f}s", st.integers(0, 9999), st.integers(0, 999)),
    st.builds(
        lambda n, u: f"{n}{u}", st.integers(0, 10**6), st.sampled_from(["ms", "s", "m", "h"])
    ),
    st.builds(lambda m, s: f"{m}m{s}s", st.integers(0, 600), st.integers(0, 59)),
)
sizes = st.builds(
    lambda n, u: f"{n}{u}", st.integers(1, 10**6), st.sampled_from(["KiB", "MiB", "GB", "kb"])
)
# A hash as logs print one: a digest, whole or cut to a short commit id. The mask knows a
# hash by its holding a digit and a letter; a cut that is all digits (a 7-digit commit id
# is so one time in 27) reads as a number, all letters as a word: not generated here.
hashes = st.builds(
    lambda data, n: hashlib.sha256(data).hexdigest()[:n], st.binary(), st.integers(7, 64)
).filter(lambda h: any(c.isdigit() for c in h) and any(c.isalpha() for c in h))
uuids = st.uuids().map(str)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)
)
timestamps = st.one_of(
    times.map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")),
    times.map(lambda t: t.isoformat(timespec="milliseconds")),
    times.map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S")),
    times.map(lambda t: t.strftime("%H:%M:%S.%f")),
)
labels = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-")
)
hosts = st.builds(
    lambda parts, tld: ".".join([*parts, tld]),
    st.lists(labels, min_size=1, max_size=3),
    st.sampled_from(["com", "org", "net", "io", "dev", "cloud"]),
)
urls = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}/{'/'.join(path)}",
    st.sampled_from(["http", "https", "git+ssh"]),
    hosts,
    st.lists(labels, max_size=4),
)
ips = st.ip_addresses(v=4).map(str)
absolute_dirs = st.builds(
    lambda root, parts: root + "/".join(parts) + "/",
    st.sampled_from(["/", "/home/", "/tmp/", "/builds/", "C:\\"]),
    st.lists(labels, min_size=1, max_size=5),
).map(lambda d: d.replace("/", "\\") if d.startswith("C:") else d)
# Two or three parts: four parts of up to three digits are an IP address's shape, and read
# as one (the same failure printing both shapes is not one we know of).
versions = st.builds(
    lambda v, parts, pre: v + ".".join(map(str, parts)) + pre,
    st.sampled_from(["", "v"]),
    st.lists(st.integers(0, 999), min_size=2, max_size=3),
    st.sampled_from(["", "-rc.1", "-beta", "+build.7"]),
)

# Templates as tools print them; {} is where what varies goes.
VARYING = {
    "numbers": (numbers, "src/cards.py:{}: error: Argument 1 has incompatible type"),
    "durations": (durations, "FAILED tests/test_deck.py::test_deal - Timeout after {}"),
    "sizes": (sizes, "fatal: the remote end hung up unexpectedly after {}"),
    "hashes": (hashes, "error: commit {} does not belong to any branch"),
    "uuids": (uuids, "job {} failed: container exited with code 137"),
    "timestamps": (timestamps, "[{}] ERROR cargo: failed to fetch `index`"),
    "urls": (urls, "error: could not download {}: 503 Service Unavailable"),
    "hosts": (hosts, "fatal: unable to access: Could not resolve host: {}"),
    "ips": (ips, "dial tcp {}: connect: connection refused"),
    "absolute paths": (absolute_dirs, '  File "{}cards.py", line 12, in deal'),
    "versions": (versions, "npm ERR! notarget No matching version found for left-pad@{}."),
}


@pytest.mark.parametrize("kind", sorted(VARYING))
def test_what_varies_between_runs_is_masked(kind: str) -> None:
    values, template = VARYING[kind]

    @SETTINGS
    @given(values, values)
    def same_signature(a: str, b: str) -> None:
        assert sig(template.format(a)).key == sig(template.format(b)).key, (
            mask(template.format(a)),
            mask(template.format(b)),
        )

    same_signature()


@SETTINGS
@given(numbers, durations, hashes, timestamps, urls, absolute_dirs, versions)
def test_a_line_with_everything_varying_at_once_keeps_its_signature(
    n: str, took: str, digest: str, at: str, url: str, where: str, version: str
) -> None:
    template = "{} {}app.py:{} fetch {} ({}) of {} failed after {}"
    reference = template.format(
        "2026-12-07T11:55:02Z", "/home/ci/work/", "1", "https://a.example.com/x", "1.0",
        "abc1234", "3s",
    )  # fmt: skip

    varied = template.format(at, where, n, url, version, digest, took)

    assert sig(varied) == sig(reference)


# --------------------------------------------------------------------------- what is kept

codes = st.builds(
    lambda prefix, n: f"{prefix}{n}",
    st.sampled_from(["E", "F", "W", "TS", "C", "SC", "PLW", "RUF"]),
    st.integers(1, 9999),
)


@SETTINGS
@given(codes, codes)
def test_an_error_code_names_the_failure(a: str, b: str) -> None:
    template = "src/cards.py:12:5: {} something is wrong here"

    same = sig(template.format(a)).key == sig(template.format(b)).key

    assert same == (a == b)


words = st.text(string.ascii_letters, min_size=1, max_size=12)


@SETTINGS
@given(words, words)
def test_another_word_is_another_failure(a: str, b: str) -> None:
    template = "error: cannot find value `{}` in this scope"

    assert (sig(template.format(a)).key == sig(template.format(b)).key) == (a == b)


relative_files = st.builds(
    lambda parts, ext: "/".join(parts) + ext,
    st.lists(
        st.text(string.ascii_lowercase + "_", min_size=1, max_size=10), min_size=1, max_size=3
    ),
    st.sampled_from([".py", ".rs", ".go", ".ts"]),
)


@SETTINGS
@given(relative_files, relative_files)
def test_a_relative_file_is_kept(a: str, b: str) -> None:
    template = "{}:10:1: error: expected expression"

    assert (sig(template.format(a)).key == sig(template.format(b)).key) == (a == b)


@SETTINGS
@given(
    absolute_dirs,
    st.sampled_from(["cards.py", "deck.py"]),
    st.sampled_from(["cards.py", "deck.py"]),
)
def test_an_absolute_paths_file_name_is_kept(where: str, a: str, b: str) -> None:
    assert (
        sig(f"E   {where}{a}:3: ImportError").key == sig(f"E   {where}{b}:3: ImportError").key
    ) == (a == b)


@SETTINGS
@given(st.text(max_size=400))
def test_mask_is_idempotent_one_line_and_bounded(line: str) -> None:
    once = mask(line)

    assert mask(once) == once
    assert "\n" not in once and len(once) <= MAX_LINE_CHARS


def test_the_signature_keeps_the_first_lines_in_order_without_blanks_or_repeats() -> None:
    signature = sig("", "  error: a 1", "error: a 2", "error: b", " ", "c", "d", "e")

    assert signature.lines == ("error: a <n>", "error: b", "c", "d")[:MAX_LINES]
    assert sig().empty and not signature.empty
    assert signature.key != signature_of("build", "lint", "code", signature.lines).key
    assert signature.key != signature_of("build", "project-tests", "network", signature.lines).key


# --------------------------------------------------------------------------- the dev logs


def test_lines_of_the_development_logs() -> None:
    # Each pair: one log's deciding line, and the same line as another run prints it.
    same = [
        (
            "downloader_test.go:679: failed to synchronise blocks: retrieved hash chain is invalid",
            "downloader_test.go:712: failed to synchronise blocks: retrieved hash chain is invalid",
        ),
        (
            "[6] Could not resolve hostname (Could not resolve host: index.crates.io)",
            "[6] Could not resolve hostname (Could not resolve host: static.crates.io)",
        ),
        (
            "--- FAIL: TestDownloader (0.58s)",
            "--- FAIL: TestDownloader (12.03s)",
        ),
        (
            "panic: test timed out after 10m0s",
            "panic: test timed out after 30m0s",
        ),
        (
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        ),
    ]
    for a, b in same:
        assert sig(a) == sig(b), (mask(a), mask(b))
    different = [
        ("cannot find value `CURSOR` in this scope", "cannot find value `CURSOR2` in this scope"),
        ("error[E0425]: cannot find value", "error[E0433]: cannot find value"),
        (
            "src/a.py:1:1: F401 'os' imported but unused",
            "src/a.py:1:1: F811 'os' imported but unused",
        ),
        ("error TS2304: Cannot find name 'x'.", "error TS2307: Cannot find name 'x'."),
        (
            "Style/FrozenStringLiteralComment: Missing magic comment",
            "Style/StringLiterals: Missing magic comment",
        ),
    ]
    for a, b in different:
        assert sig(a) != sig(b), (mask(a), mask(b))


@pytest.mark.skipif(not CI_LOGS.is_dir(), reason="the development logs are not beside the repo")
def test_no_two_different_root_causes_of_the_development_logs_share_a_masked_line() -> None:
    masked: dict[str, str] = {}
    for label in sorted(CI_LOGS.glob("*/label.json")):
        cause = json.loads(label.read_text())["root_cause"][0]
        line = mask(cause)
        assert line and mask(line) == line
        assert masked.setdefault(line, cause) == cause, (label.parent.name, line)
    assert len(masked) >= 100
