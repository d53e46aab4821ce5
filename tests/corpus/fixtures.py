"""Fixtures: the labelled failure corpus, built once per test run by running the real
tools, and the offline evaluation over it, also computed once per run. A plugin
(``pytest_plugins`` in tests/conftest.py), not a conftest: a second module named
``conftest`` would shadow the top-level one that tests import helpers from.

Under pytest-xdist every worker asks for the corpus and its evaluation; the first builds
each (``tests/support/once.py``) and the others read that one, instead of each running mypy, ruff
and pytest over every shape again (about 15 s of CPU a build) and evaluating it again."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.validation import Frozen
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.layers import TICKET_FILE
from orchestrator.eval.offline import CaseResult, Summary, evaluate
from orchestrator.eval.report import render_table

from corpus.build import build
from support.once import built_once, computed_once

_REPORTED: list[str] = []
_WORKER_KEY = "orchestrator-eval-tables"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    def build_corpus(where: Path) -> None:
        for line in build(where):
            print(f"corpus: {line}")

    return built_once(tmp_path_factory, pytestconfig, "corpus", build_corpus)


# Two shapes of the built corpus and their padded twins: for a test of a command or a
# script over a corpus (its output, its errors), not of the eval's quality. A second
# where the whole corpus costs a quarter of a minute of CPU a run.
FEW: Final = ("commit-order-squash", "commit-order-two")


def some_cases(corpus_dir: Path, dest: Path, case_ids: Iterable[str]) -> Path:
    """A corpus at ``dest`` of these cases of ``corpus_dir``, with the ticket they share."""
    dest.mkdir(parents=True)
    for case_id in case_ids:
        shutil.copytree(corpus_dir / case_id, dest / case_id)
    shutil.copy(corpus_dir / TICKET_FILE, dest / TICKET_FILE)
    return dest


@pytest.fixture
def few_cases(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    source = corpus_holding(request, FEW)
    return some_cases(source, tmp_path / "few-cases", (i for c in FEW for i in (c, f"{c}-padded")))


def corpus_holding(request: pytest.FixtureRequest, shapes: tuple[str, ...]) -> Path:
    """A built corpus that holds ``shapes`` (and their padded twins): the whole corpus where
    a test of this run needs it anyway; else (a run of only the tests that need a few
    cases, as the quick tier is) only these shapes, built once per run. Copy from it."""
    if any("corpus_dir" in item.fixturenames for item in request.session.items):
        whole: Path = request.getfixturevalue("corpus_dir")
        return whole

    def build_these(where: Path) -> None:
        for line in build(where, only=shapes):
            print(f"corpus: {line}")

    name = "corpus-" + "+".join(sorted(shapes))
    tmp_path_factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    return built_once(tmp_path_factory, request.config, name, build_these)


@pytest.fixture(scope="session")
def offline(
    corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> tuple[dict[str, CaseResult], Summary]:
    def evaluated() -> str:
        results, summary = evaluate(load_corpus(corpus_dir), corpus_dir, ContextLimits())
        return _Evaluated(results=results, summary=summary).model_dump_json()

    found = _Evaluated.model_validate_json(
        computed_once(tmp_path_factory, pytestconfig, "offline-eval", evaluated)
    )
    _REPORTED.append(render_table(found.summary))
    return {r.id: r for r in found.results}, found.summary


class _Evaluated(Frozen):
    results: tuple[CaseResult, ...]
    summary: Summary


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
