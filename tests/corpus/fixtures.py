"""Fixtures: the labelled failure corpus, built once per test session by running the real
tools, and the offline evaluation over it, also computed once. A plugin (``pytest_plugins``
in tests/conftest.py), not a conftest: a second module named ``conftest`` would shadow the
top-level one that tests import helpers from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.offline import CaseResult, Summary, evaluate
from orchestrator.eval.report import render_table

from corpus.build import build

_REPORTED: list[str] = []


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("corpus") / "cases"
    skipped = build(where)
    for line in skipped:
        print(f"corpus: {line}")
    return where


@pytest.fixture(scope="session")
def offline(corpus_dir: Path) -> tuple[dict[str, CaseResult], Summary]:
    results, summary = evaluate(load_corpus(corpus_dir), corpus_dir, ContextLimits())
    _REPORTED.append(render_table(summary))
    return {r.id: r for r in results}, summary


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None] | None:
    # The eval's numbers (root-cause recall, padded included) are printed with every run
    # that computed them, pass or fail: they are the measurement, not only a verdict.
    for table in _REPORTED:
        terminalreporter.section("orchestrator eval (offline) over the failure corpus")
        terminalreporter.write(table)
    return None
