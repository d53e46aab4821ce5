"""A line's template masks what changes between runs and keeps what a line says."""

from __future__ import annotations

import pytest

from orchestrator.domain.line_templates import MAX_TEMPLATE_BYTES, template_key, template_of


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # Same line, another run: timestamps, durations, sizes, hashes, paths, ids.
        (
            b"2019-07-29T11:48:31.123Z Downloaded 1.2 MB in 3.4s",
            b"2020-01-02T01:02:03Z Downloaded 17 MB in 12s",
        ),
        (b"Compiling serde v1.0.104", b"Compiling serde v1.0.99"),
        (b"commit 3f2a9c1d in /home/travis/build/a/b", b"commit 0badc0de in /builds/x/y/z"),
        (
            b"device 8F3A1C2B-1111-2222-3333-444455556666 booted",
            b"device 00000000-AAAA-BBBB-CCCC-DDDDEEEEFFFF booted",
        ),
        (
            b"test tests/test_a.py::test_x[1-2] PASSED [ 45%]",
            b"test tests/test_b.py::test_x[3-4] PASSED [100%]",
        ),
        (b"ok   \tgithub.com/x/y\t0.012s", b"ok   \tgithub.com/x/z\t1.5s"),
    ],
)
def test_run_to_run_detail_is_masked(one: bytes, other: bytes) -> None:
    assert template_of(one) == template_of(other)
    assert template_key(template_of(one)) == template_key(template_of(other))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (b"test_a PASSED", b"test_a FAILED"),
        (b"Compiling serde v1.0.104", b"error: could not compile serde"),
        (b"Step 12/20 : RUN make", b"Step 12/20 : RUN make install"),
    ],
)
def test_what_a_line_says_is_kept(one: bytes, other: bytes) -> None:
    assert template_of(one) != template_of(other)


def test_a_minified_line_is_one_bounded_template() -> None:
    line = b"var a=" + b"x" * 10_000
    assert len(template_of(line)) == MAX_TEMPLATE_BYTES
    assert template_of(line) == template_of(line + b"y")
