"""Where the suite's time goes, printed with every run, and the slow tier's one rule.

A plugin (``pytest_plugins`` in tests/conftest.py). At the end of a run it prints:

* the run's wall time, its tier and its worker count;
* the 20 slowest tests (setup + call + teardown), each with its *own* time: the same less
  what it spent setting up or tearing down a fixture shared beyond it (session, package,
  module or class scope), which the first and last users of that fixture would otherwise
  carry for everyone;
* the time by folder (with the CPU its tests used: their worker's, and that of the
  processes they started and waited for), the run's CPU and its 20 costliest tests: on
  a machine the suite keeps busy, CPU is where the wall time goes;
* the time by fixture (its setup and teardown over all its uses).

The tiers: the full suite, and the quick one (``-m "not slow or quick"``): every test not
marked ``slow``, plus those marked ``quick`` as well: the one test a file of slow tests
keeps there, so the quick tier still runs every test file, and property tests whose quick
profile draws a fifth of the examples. ``files_without_a_quick_test`` is what
collection found missing (``tests/test_tiers.py`` asserts it is empty). The end-to-end
folder (``FULL_TIER_ONLY``) is exempt: each of its tests drives the real CLI through real
stages, forges and sandboxes for seconds, and the quick tier proves their parts; its
few tests that take well under a second stay quick all the same.

The rule: a test of the tier being run whose own time is over ``LIMIT_S`` on a core of its
own (``limit_s``: grown by the runnable processes per core) fails the run, by name, unless
it is marked ``slow`` and this is the full tier. The quick tier stays quick
only if nothing slow creeps into it unmarked; a fixture shared by many tests is judged on
its own line instead.

Under pytest-xdist the fixtures are timed in the workers and ride to the controller on
each phase's report (``user_properties``), which is where the tables are made.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter, defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LIMIT_S = 10.0
# The limit is a test's own time on a core of its own: CI's machine has two cores and the
# suite runs four workers on them, so every test shares its core with another, and
# `scripts/dev.sh test-under-load` adds busy processes (it says how many here). The limit
# grows with the runnable processes per core: a budget, not a clock that trips on load.
BUSY_ENV = "SUITE_CLOCK_BUSY_PROCESSES"
QUICK_TIER = "not slow or quick"  # scripts/dev.sh test --quick selects this
# Test files that need no test in the quick tier: end to end, seconds each (CI runs them):
# the end-to-end folder, and the files whose only tests run whole batches through Celery
# workers or real stages.
FULL_TIER_ONLY = (
    "tests/e2e/",
    "tests/contract/",
    "tests/batch/celery/test_fleet_report.py",
    "tests/batch/celery/test_fleet_sources.py",
    "tests/reports/test_waiting_latest_only.py",
)
SLOWEST = 20
FOLDERS = 15
FIXTURES = 15
# The key under which a phase's fixture times travel on its report.
_PROPERTY = "suite-clock-fixtures"
_CPU_PROPERTY = "suite-clock-cpu"


@dataclass
class _TestTime:
    total: float = 0.0
    shared: float = 0.0  # setup and teardown of fixtures shared beyond this test
    cpu: float = 0.0  # the worker's CPU and its waited-for children's, over the three phases
    slow: bool = False
    quick: bool = False

    @property
    def own(self) -> float:
        return max(0.0, self.total - self.shared)


@dataclass
class _Clock:
    started: float = field(default_factory=time.monotonic)
    tests: dict[str, _TestTime] = field(default_factory=lambda: defaultdict(_TestTime))
    fixture_s: Counter[str] = field(default_factory=Counter)
    fixture_uses: Counter[str] = field(default_factory=Counter)
    # In a worker (or a run without workers): fixture times of the phase under way.
    phase: list[tuple[str, str, float]] = field(default_factory=list)
    teardown_started: dict[int, float] = field(default_factory=dict)
    over_limit: list[tuple[str, float]] = field(default_factory=list)
    cpu_mark: float = 0.0  # in a worker: CPU used when the phase under way began


_clock = _Clock()


# A file to write every test's times to (JSON), when set.
TIMES_ENV = "ORCHESTRATOR_SUITE_TIMES"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
) -> Generator[None, None, None]:
    started = time.perf_counter()
    yield
    _clock.phase.append((fixturedef.argname, fixturedef.scope, time.perf_counter() - started))
    # Finalizers run last-added first: this one runs just before the fixture's own
    # teardown, and pytest_fixture_post_finalizer just after it.
    fixturedef.addfinalizer(
        lambda: _clock.teardown_started.__setitem__(id(fixturedef), time.perf_counter())
    )


def pytest_fixture_post_finalizer(
    fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
) -> None:
    started = _clock.teardown_started.pop(id(fixturedef), None)
    if started is not None:
        _clock.phase.append((fixturedef.argname, fixturedef.scope, time.perf_counter() - started))


def _cpu_s() -> float:
    """CPU this process and the children it has waited for have used, in seconds."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    _clock.cpu_mark = _cpu_s()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report = outcome.get_result()
    now = _cpu_s()
    cpu, _clock.cpu_mark = now - _clock.cpu_mark, now
    # A list of its own: the item's list is shared by all three phases' reports.
    report.user_properties = [
        *report.user_properties,
        (_PROPERTY, list(_clock.phase)),
        (_CPU_PROPERTY, cpu),
    ]
    _clock.phase.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    test = _clock.tests[report.nodeid]
    test.total += report.duration
    test.slow = test.slow or "slow" in report.keywords
    test.quick = test.quick or "quick" in report.keywords
    for name, value in report.user_properties:
        if name == _CPU_PROPERTY:
            test.cpu += value  # type: ignore[operator]
        if name != _PROPERTY:
            continue
        for argname, scope, seconds in value:  # type: ignore[attr-defined]
            _clock.fixture_s[f"{argname} ({scope})"] += seconds
            if report.when == "setup":
                _clock.fixture_uses[f"{argname} ({scope})"] += 1
            if scope != "function":
                test.shared += seconds


def _busy() -> int:
    return int(os.environ.get(BUSY_ENV) or 0)


def _workers(config: pytest.Config) -> int:
    return getattr(config.option, "numprocesses", None) or 0


def per_core(workers: int, busy: int, cores: int) -> float:
    """Runnable processes per core, at least one: the run's workers (one process when
    there are none) and the busy processes beside them."""
    return max(1.0, (max(workers, 1) + busy) / max(cores, 1))


def limit_s(config: pytest.Config) -> float:
    """The slow-tier limit for this run: ``LIMIT_S`` on a core of its own, times the
    runnable processes per core."""
    return LIMIT_S * per_core(_workers(config), _busy(), os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _is_worker(session.config):
        return
    quick_run = session.config.option.markexpr == QUICK_TIER
    _clock.over_limit = sorted(
        (
            (nodeid, t.own)
            for nodeid, t in _clock.tests.items()
            if t.own > limit_s(session.config) and (not t.slow or (quick_run and t.quick))
        ),
        key=lambda pair: -pair[1],
    )
    if _clock.over_limit and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_FILES_WITHOUT_QUICK = pytest.StashKey[list[str]]()
_FILES_COLLECTED = pytest.StashKey[set[str]]()


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything: every collected test is seen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    files: dict[str, bool] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        in_quick = item.get_closest_marker("slow") is None or item.get_closest_marker("quick")
        files[path] = files.get(path, False) or bool(in_quick)
    config.stash[_FILES_WITHOUT_QUICK] = sorted(
        path for path, has in files.items() if not has and not path.startswith(FULL_TIER_ONLY)
    )
    config.stash[_FILES_COLLECTED] = set(files)


def files_without_a_quick_test(config: pytest.Config) -> list[str]:
    """The test files this run collected that have no test in the quick tier."""
    return config.stash.get(_FILES_WITHOUT_QUICK, [])


def files_collected(config: pytest.Config) -> set[str]:
    """The test files this run collected, before ``-m`` or ``-k`` deselected any test."""
    return config.stash.get(_FILES_COLLECTED, set())


def _limit_note(config: pytest.Config) -> str:
    workers, busy = _workers(config), _busy()
    if per_core(workers, busy, os.cpu_count() or 1) == 1.0:
        return ""
    beside = f" and {busy} busy processes" if busy else ""
    return (
        f" ({LIMIT_S:.0f} s on a core of its own, grown for {max(workers, 1)} workers{beside} "
        f"on {os.cpu_count()} cores)"
    )


def _folder(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if _is_worker(config) or not _clock.tests:
        return
    write = terminalreporter.write_line
    wall = time.monotonic() - _clock.started
    workers = getattr(config.option, "numprocesses", None) or 0
    marks = config.option.markexpr or "all"
    terminalreporter.section("suite time")
    write(
        f"wall {wall:.1f} s for {len(_clock.tests)} tests; "
        f"{f'{workers} xdist worker(s)' if workers else 'one process'}; tests selected: {marks}; "
        f"slow-tier limit {limit_s(config):.0f} s"
    )
    write(f"slowest {SLOWEST} tests (setup + call + teardown; own: less shared fixtures):")
    slowest = sorted(_clock.tests.items(), key=lambda pair: -pair[1].total)[:SLOWEST]
    for nodeid, t in slowest:
        write(f"  {t.total:6.2f} s  own {t.own:6.2f} s  {'slow ' if t.slow else '     '}{nodeid}")
    by_folder: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for nodeid, t in _clock.tests.items():
        by_folder[_folder(nodeid)] += t.total
        count[_folder(nodeid)] += 1
    cpu_by_folder: Counter[str] = Counter()
    for nodeid, t in _clock.tests.items():
        cpu_by_folder[_folder(nodeid)] += t.cpu
    write(f"by folder (top {FOLDERS}; CPU: the tests' processes and those they waited for):")
    for folder, seconds in by_folder.most_common(FOLDERS):
        write(
            f"  {seconds:7.1f} s  CPU {cpu_by_folder[folder]:7.1f} s  {count[folder]:5d} tests  "
            f"{folder}"
        )
    cpu = sum(t.cpu for t in _clock.tests.values())
    write(
        f"CPU {cpu:.0f} s over the run ({cpu / wall:.1f} cores' worth of its wall time); "
        f"the {SLOWEST} costliest tests:"
    )
    costliest = sorted(_clock.tests.items(), key=lambda pair: -pair[1].cpu)[:SLOWEST]
    for nodeid, t in costliest:
        write(f"  CPU {t.cpu:6.2f} s  {'slow ' if t.slow else '     '}{nodeid}")
    write(f"by fixture, setup and teardown over all uses (top {FIXTURES}):")
    for fixture, seconds in _clock.fixture_s.most_common(FIXTURES):
        write(f"  {seconds:7.1f} s  {_clock.fixture_uses[fixture]:5d} uses  {fixture}")
    if dump := os.environ.get(TIMES_ENV):
        # Every test's times, for a look past the top 20 (where a suite's minutes hide).
        Path(dump).write_text(
            json.dumps(
                {
                    n: {"total": t.total, "own": t.own, "cpu": t.cpu}
                    for n, t in _clock.tests.items()
                },
                indent=0,
            ),
            encoding="utf-8",
        )
    if _clock.over_limit:
        terminalreporter.write_line(
            f"FAILED: {len(_clock.over_limit)} test(s) took over {limit_s(config):.0f} s of their "
            f"own outside the slow tier{_limit_note(config)}: make them faster, or mark them slow "
            "(@pytest.mark.slow) if what they prove needs the time:",
            red=True,
            bold=True,
        )
        for nodeid, seconds in _clock.over_limit:
            terminalreporter.write_line(f"  {seconds:6.2f} s  {nodeid}", red=True)
