"""The quick tier runs every test file: a file whose tests are all marked ``slow`` keeps
one, marked ``quick`` (see tests/suite_clock.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite_clock import QUICK_TIER, files_collected, files_without_a_quick_test, per_core

HERE = Path(__file__).resolve().parent


def test_every_test_file_has_a_test_in_the_quick_tier(request: pytest.FixtureRequest) -> None:
    every_file = {str(p.relative_to(HERE.parent)) for p in HERE.rglob("test_*.py")}
    if not every_file <= files_collected(request.config):
        pytest.skip("only a run that collects the whole suite can tell")
    assert files_without_a_quick_test(request.config) == []


def test_the_quick_tier_is_what_dev_sh_selects() -> None:
    script = (HERE.parent / "scripts" / "dev.sh").read_text()
    assert f'-m "{QUICK_TIER}"' in script


@pytest.mark.parametrize(
    ("workers", "busy", "cores", "expected"),
    [
        (0, 0, 2, 1.0),  # one process on two cores: a core of its own
        (2, 0, 2, 1.0),
        (4, 0, 2, 2.0),  # CI: four workers share two cores
        (4, 2, 2, 3.0),  # test-under-load's two busy processes beside them
        (0, 2, 2, 1.5),
        (4, 0, 8, 1.0),
    ],
)
def test_the_limit_grows_with_the_runnable_processes_per_core(
    workers: int, busy: int, cores: int, expected: float
) -> None:
    assert per_core(workers, busy, cores) == expected
