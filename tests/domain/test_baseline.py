"""A baseline of green runs knows the lines a passing check prints, whatever numbers,
paths and times they carry in another run; it stays bounded; its bytes read back or are
refused."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.baseline import (
    MAX_LINE_BYTES,
    Baseline,
    BaselineDamaged,
    learn,
    log_lines,
    merge,
)
from orchestrator.domain.line_templates import template_key, template_of

GREEN_1 = b"""\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/runner/work/deal/deal
collected 412 items

tests/test_cards.py ........................................ [  9%]
tests/test_deal.py ..................................... [ 18%]
Downloaded https://files.pythonhosted.org/packages/ab/cd/six-1.16.0.tar.gz (34 kB) in 0.21s
cache hit for key deps-3f2a9c1d7e
============================= 412 passed in 12.34s =============================
"""
# The same check, another day: other numbers, paths, hashes, durations.
GREEN_2 = b"""\
============================= test session starts ==============================
platform linux -- Python 3.12.1, pytest-8.3.4, pluggy-1.5.0
rootdir: /builds/team/deal
collected 415 items

tests/test_hands.py ........................................ [ 11%]
tests/test_deal.py ..................................... [100%]
Downloaded https://files.pythonhosted.org/packages/12/ef/attrs-23.2.0.tar.gz (61 kB) in 1.5s
cache hit for key deps-0badc0de99
============================= 415 passed in 9.8s =============================
"""
NEW_LINES = (
    b"E       AssertionError: assert 3 == 4",
    b"FAILED tests/test_deal.py::test_split - AssertionError",
    b"=========================== 1 failed, 414 passed in 9.1s ===========================",
)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def knows_line(baseline: Baseline, line: bytes) -> bool:
    return baseline.knows(template_of(line))


def test_a_green_run_knows_the_lines_of_another_green_run(tmp_path: Path) -> None:
    baseline = learn(None, write(tmp_path, "1.log", GREEN_1), check="unit", repo="r")
    assert (baseline.check, baseline.repo, baseline.runs) == ("unit", "r", 1)
    for line in GREEN_2.splitlines():
        assert knows_line(baseline, line), line
    for line in NEW_LINES:
        assert not knows_line(baseline, line), line


def test_each_green_run_counts(tmp_path: Path) -> None:
    log_1, log_2 = write(tmp_path, "1.log", GREEN_1), write(tmp_path, "2.log", GREEN_2)
    baseline = learn(None, log_1, check="unit", repo="r")
    baseline = learn(baseline, log_2, check="unit", repo="r")
    baseline = learn(baseline, log_1, check="unit", repo="r")
    assert baseline.runs == 3
    assert baseline.runs_with(template_of(b"collected 9 items")) == 3
    assert baseline.runs_with(template_of(NEW_LINES[0])) == 0


def test_lines_are_read_as_a_terminal_shows_them(tmp_path: Path) -> None:
    log = write(
        tmp_path,
        "drawn.log",
        b"\x1b[32mPASSED\x1b[0m all good\r\n"
        b"Fetching 10%\rFetching 55%\rFetched everything\n"
        b"\x1b]0;a window title\x07\x1b[1mBold\x1b[0m summary\n",
    )
    baseline = learn(None, log, check="c", repo="r")
    assert knows_line(baseline, b"PASSED all good")
    assert knows_line(baseline, b"Fetched everything")
    assert not knows_line(baseline, b"Fetching 10%")  # a stale frame, never seen
    assert knows_line(baseline, b"Bold summary")
    assert len(baseline) == 3


def test_a_ci_runners_prefix_is_not_part_of_the_line(tmp_path: Path) -> None:
    log = write(
        tmp_path,
        "ci.log",
        b"2026-12-01T02:53:12.1234567Z ok github.com/x/deal 0.012s\n"
        b"build\tRun tests\t2026-12-01T02:53:13.0000000Z --- PASS: TestSplit\n"
        b"2026-12-01T02:53:14.123456Z 00O Job succeeded\n"
        b"#8 1.234 all tests green\n"
        b"[2026-12-01T02:53:12.123Z] Finished: SUCCESS\n",
    )
    baseline = learn(None, log, check="c", repo="r")
    for line in (
        b"ok github.com/x/deal 0.5s",
        b"--- PASS: TestSplit",
        b"Job succeeded",
        b"all tests green",
        b"Finished: SUCCESS",
    ):
        assert knows_line(baseline, line), line


def test_only_the_last_max_log_bytes_are_read_from_a_whole_line(tmp_path: Path) -> None:
    head = b"".join(b"early line %d of setup\n" % i for i in range(50))
    tail = b"late summary line\n" * 20
    log = write(tmp_path, "long.log", head + tail)
    # The window starts inside the head's last line: that cut line is not a line.
    window = len(tail) + 5
    baseline = learn(None, log, check="c", repo="r", max_log_bytes=window)
    assert knows_line(baseline, b"late summary line")
    assert not knows_line(baseline, b"early line 7 of setup")
    assert not knows_line(baseline, b"setup")
    assert len(baseline) == 1


def test_a_window_that_starts_on_a_line_start_keeps_that_line(tmp_path: Path) -> None:
    log = write(tmp_path, "two.log", b"first line here\nsecond line here\n")
    baseline = learn(None, log, check="c", repo="r", max_log_bytes=len(b"second line here\n"))
    assert knows_line(baseline, b"second line here")
    assert len(baseline) == 1


def test_a_huge_line_is_read_from_its_start_and_the_lines_after_it_count(
    tmp_path: Path,
) -> None:
    # A minified bundle: 3 MiB without a line break, of one token (masking costs the
    # square of a token's length: a line is templated from its first KiB).
    log = write(tmp_path, "minified.log", b"start " + b"a" * (3 << 20) + b"\nafter it\n")
    baseline = learn(None, log, check="c", repo="r")
    assert knows_line(baseline, b"after it")
    assert baseline.knows(template_of((b"start " + b"a" * (3 << 20))[:MAX_LINE_BYTES]))
    assert len(baseline) == 2


def test_log_lines_are_what_a_reader_compares(tmp_path: Path) -> None:
    log = write(tmp_path, "x.log", b"2026-12-01T02:53:12Z \x1b[31mboom\x1b[0m\n" + b"z" * 5000)
    lines = [line for chunk in log_lines(log) for line in chunk]
    assert lines == [b"boom", b"z" * MAX_LINE_BYTES]


def test_a_log_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        learn(None, tmp_path, check="c", repo="r")
    with pytest.raises(FileNotFoundError):
        learn(None, tmp_path / "missing.log", check="c", repo="r")


# ---- bounded --------------------------------------------------------------------------


def distinct_lines(prefix: str, count: int) -> bytes:
    # Words, not numbers: each line is its own template.
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    return b"".join(
        f"{prefix} {words[i % 8]} {words[i // 8 % 8]} {words[i // 64 % 8]}\n".encode()
        for i in range(count)
    )


def test_one_run_keeps_at_most_max_keys(tmp_path: Path) -> None:
    log = write(tmp_path, "many.log", distinct_lines("step", 300))
    baseline = learn(None, log, check="c", repo="r", max_keys=50)
    assert len(baseline) == 50
    assert baseline.runs == 1


def test_over_max_keys_the_keys_of_the_most_runs_stay(tmp_path: Path) -> None:
    steady = write(tmp_path, "steady.log", distinct_lines("steady", 6))
    other = write(tmp_path, "other.log", distinct_lines("other", 6))
    baseline = None
    for _ in range(3):
        baseline = learn(baseline, steady, check="c", repo="r", max_keys=8)
    baseline = learn(baseline, other, check="c", repo="r", max_keys=8)
    assert len(baseline) == 8 and baseline.runs == 4
    for line in distinct_lines("steady", 6).splitlines():
        assert baseline.runs_with(template_of(line)) == 3
    known_others = [
        line for line in distinct_lines("other", 6).splitlines() if knows_line(baseline, line)
    ]
    assert len(known_others) == 2


def test_among_keys_of_as_many_runs_the_newer_runs_stay(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", distinct_lines("old", 6))
    new = write(tmp_path, "new.log", distinct_lines("new", 6))
    baseline = learn(None, old, check="c", repo="r", max_keys=6)
    baseline = learn(baseline, new, check="c", repo="r", max_keys=6)
    assert all(knows_line(baseline, line) for line in distinct_lines("new", 6).splitlines())
    assert not any(knows_line(baseline, line) for line in distinct_lines("old", 6).splitlines())


def test_a_run_count_saturates_and_the_runs_go_on(tmp_path: Path) -> None:
    one = learn(None, write(tmp_path, "1.log", b"same line\n"), check="c", repo="r")
    baseline = one
    for _ in range(299):
        baseline = merge(baseline, one)
    assert baseline.runs == 300
    assert baseline.runs_with(template_of(b"same line")) == 255
    assert Baseline.from_bytes(baseline.to_bytes()) == baseline


def test_runs_of_another_check_are_not_merged(tmp_path: Path) -> None:
    log = write(tmp_path, "1.log", GREEN_1)
    unit = learn(None, log, check="unit", repo="r")
    with pytest.raises(ValueError, match="cannot merge 'lint' of 'r' into 'unit' of 'r'"):
        learn(unit, log, check="lint", repo="r")


@pytest.mark.slow
def test_a_big_log_learns_in_bounded_memory(tmp_path: Path) -> None:
    # 8 MiB of a test run's lines (repeated: templating them is not what is measured;
    # bench/bench_baseline.py learns a 64 MiB one).
    block = b"".join(
        b"tests/test_%03d.py::test_case PASSED in 0.%02ds\n" % (i, i % 97) for i in range(400)
    )
    log = tmp_path / "big.log"
    with log.open("wb") as f:
        while f.tell() < 8 << 20:
            f.write(block)
    tracemalloc.start()
    try:
        baseline = learn(None, log, check="c", repo="r")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert knows_line(baseline, b"tests/test_999.py::test_case PASSED in 1.5s")
    # A few chunks of 256 KiB and their lines (2 MiB), not the log.
    assert peak < 4 << 20, peak


def test_with_max_seconds_what_was_read_by_then_is_learned(tmp_path: Path) -> None:
    log = write(tmp_path, "slow.log", distinct_lines("line", 100))
    ticks: Iterator[float] = iter(range(1000))
    baseline = learn(
        None, log, check="c", repo="r", max_seconds=5.5, _clock=lambda: float(next(ticks))
    )
    assert baseline.runs == 1
    assert len(baseline) == 6  # the clock is read once before and once after each line


# ---- the format -----------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> Baseline:
    return learn(None, write(tmp_path, "g.log", b"one\ntwo\nthree\n"), check="unit", repo="origin")


def test_the_bytes_read_back_as_the_same_baseline(tmp_path: Path) -> None:
    baseline = learn(None, write(tmp_path, "1.log", GREEN_1), check="ünit", repo="/srv/r.git")
    data = baseline.to_bytes()
    assert data.startswith(b"ORCHBASE\x01\x00")
    again = Baseline.from_bytes(data)
    assert again == baseline
    assert again.to_bytes() == data
    assert all(knows_line(again, line) for line in GREEN_2.splitlines())
    # 9 bytes a key: the header, the names and a checksum besides.
    assert len(data) == 24 + len("ünit".encode()) + len("/srv/r.git") + 9 * len(baseline) + 16


def test_an_empty_baseline_reads_back(tmp_path: Path) -> None:
    empty = learn(None, write(tmp_path, "empty.log", b""), check="c", repo="r")
    assert len(empty) == 0 and empty.runs == 1
    assert Baseline.from_bytes(empty.to_bytes()) == empty


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: b"", "truncated: 0 bytes, less than a header"),
        (lambda d: d[:-1], "truncated"),
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d + b"\x00", "trailing bytes"),
        (lambda d: b"NOTABASE" + d[8:], "not a baseline (wrong magic)"),
        (lambda d: d[:8] + b"\x02" + d[9:], "unknown format version 2.0"),
        (lambda d: d[:-20] + bytes([d[-20] ^ 1]) + d[-19:], "checksum mismatch"),
    ],
)
def test_damaged_bytes_are_refused(small: Baseline, damage: object, message: str) -> None:
    assert callable(damage)
    with pytest.raises(BaselineDamaged, match=message.replace("(", r"\(").replace(")", r"\)")):
        Baseline.from_bytes(damage(small.to_bytes()))


def test_any_one_byte_flipped_is_refused(small: Baseline) -> None:
    data = small.to_bytes()
    for at in range(len(data)):
        for bit in (0x01, 0x80):
            damaged = data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :]
            with pytest.raises(BaselineDamaged):
                Baseline.from_bytes(damaged)


def test_any_cut_is_refused(small: Baseline) -> None:
    data = small.to_bytes()
    for length in range(len(data)):
        with pytest.raises(BaselineDamaged):
            Baseline.from_bytes(data[:length])


def resealed(body: bytes) -> bytes:
    """``body`` with a valid checksum: damage a checksum cannot see."""
    import hashlib

    return body + hashlib.blake2b(body, digest_size=16).digest()


def test_keys_out_of_order_or_without_a_run_are_refused() -> None:
    header = struct.pack("<8sHHIIHH", b"ORCHBASE", 1, 0, 1, 2, 1, 1) + b"cr"
    key_a, key_b = template_key(b"a"), template_key(b"b")
    low, high = sorted((key_a, key_b))
    with pytest.raises(BaselineDamaged, match="keys out of order"):
        Baseline.from_bytes(resealed(header + high + low + b"\x01\x01"))
    with pytest.raises(BaselineDamaged, match="keys out of order"):
        Baseline.from_bytes(resealed(header + low + low + b"\x01\x01"))
    with pytest.raises(BaselineDamaged, match="a key with no run"):
        Baseline.from_bytes(resealed(header + low + high + b"\x01\x00"))
    assert len(Baseline.from_bytes(resealed(header + low + high + b"\x01\x02"))) == 2


def test_a_name_that_is_not_utf8_is_refused() -> None:
    body = struct.pack("<8sHHIIHH", b"ORCHBASE", 1, 0, 1, 0, 1, 1) + b"\xffr"
    with pytest.raises(BaselineDamaged, match="a name is not UTF-8"):
        Baseline.from_bytes(resealed(body))


def test_a_baseline_cannot_be_changed(small: Baseline) -> None:
    with pytest.raises(AttributeError, match="immutable"):
        small.runs = 5  # type: ignore[misc]
    assert small.runs == 1
