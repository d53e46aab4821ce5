"""Fixtures: the labelled failure corpus, built once per test run by running the real
tools, and the offline evaluation over it, also computed once per process. A plugin
(``pytest_plugins`` in tests/conftest.py), not a conftest: a second module named
``conftest`` would shadow the top-level one that tests import helpers from.

Under pytest-xdist every worker asks for the corpus; the first builds it in the run's
shared temp root under a lock and the others read that one, instead of each running
mypy, ruff and pytest over every shape again (about 15 s of CPU a build)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.offline import CaseResult, Summary, evaluate
from orchestrator.eval.report import render_table

from corpus.build import build

_REPORTED: list[str] = []
_BUILT = "built"  # written last: a build killed halfway is rebuilt, never half-read
_WORKER_KEY = "orchestrator-eval-tables"


def shared_temp_root(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """The run's temp root, the same for every xdist worker of the run (each worker's own
    basetemp is a folder under it); without workers, the session's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    root = shared_temp_root(tmp_path_factory, pytestconfig) / "corpus"
    root.mkdir(exist_ok=True)
    where = root / "cases"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / _BUILT).exists():
            for line in build(where):
                print(f"corpus: {line}")
            (root / _BUILT).write_text("")
    return where


@pytest.fixture(scope="session")
def offline(corpus_dir: Path) -> tuple[dict[str, CaseResult], Summary]:
    results, summary = evaluate(load_corpus(corpus_dir), corpus_dir, ContextLimits())
    _REPORTED.append(render_table(summary))
    return {r.id: r for r in results}, summary


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A worker hands its table to the controller, which prints it (workers print nothing).
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_KEY] = list(_REPORTED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    _REPORTED.extend(getattr(node, "workeroutput", {}).get(_WORKER_KEY, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None] | None:
    # The eval's numbers (root-cause recall, padded included) are printed with every run
    # that computed them, pass or fail: they are the measurement, not only a verdict. The
    # same corpus gives every worker the same table: it is printed once.
    for table in dict.fromkeys(_REPORTED):
        terminalreporter.section("orchestrator eval (offline) over the failure corpus")
        terminalreporter.write(table)
    return None
