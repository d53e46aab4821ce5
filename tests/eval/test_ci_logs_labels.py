"""The ci-logs label format read onto ``CaseLabel``: how each field maps, which actions a
good decision may take for each class, and a bad label refused with its file and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.domain.proposals import Failure
from orchestrator.eval.ci_logs import ACCEPTABLE_ACTIONS, CHECK_NAME
from orchestrator.eval.corpus import CorpusError, load_corpus
from orchestrator.eval.offline import FRESH_CAPS
from orchestrator.recovery.diagnose import infra_decision


def _ci_label(**changes: Any) -> dict[str, Any]:
    label: dict[str, Any] = {
        "source_url": "https://example.org/build/1.log",
        "origin": "example/project:ci/1.log",
        "ci_system": "travis-ci",
        "project": "example/project",
        "tool": "pytest",
        "family": "pytest",
        "failure_class": "code",
        "root_cause": ["NameError: name 'x' is not defined", "tests/test_x.py:3"],
        "notes": "The test module uses an undefined name. The earlier job passed.",
    }
    label.update(changes)
    return {key: value for key, value in label.items() if value is not None}


def _write(corpus: Path, case_id: str, label: dict[str, Any], log: bytes = b"log\n") -> Path:
    where = corpus / case_id
    where.mkdir(parents=True)
    (where / "log.txt").write_bytes(log)
    (where / "label.json").write_text(json.dumps(label))
    return where / "label.json"


def test_a_ci_logs_label_is_a_failing_check_whose_code_failure_warrants_a_call(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "01-pytest-name", _ci_label())
    (case,) = load_corpus(tmp_path)
    label = case.label
    assert (label.id, label.source, label.check, label.exit_code, label.timed_out) == (
        "01-pytest-name", "check", CHECK_NAME, 1, False,
    )  # fmt: skip
    assert label.model_call_warranted
    assert label.root_cause == "NameError: name 'x' is not defined"
    assert label.root_cause_also == ("tests/test_x.py:3",)
    assert label.family == "pytest" and label.tool == "pytest"
    assert label.acceptable_actions == ("retry", "escalate-model", "switch-engine", "split")
    assert case.log_path == tmp_path / "01-pytest-name" / "log.txt"


@pytest.mark.parametrize(
    ("failure_class", "kind", "warranted", "actions"),
    [
        ("code", "mechanical", True, ("retry", "escalate-model", "switch-engine", "split",
                                      "mechanical-fix")),
        ("code", "dependency", True, ("retry", "escalate-model", "switch-engine", "split",
                                      "mechanical-fix", "abandon-human")),
        ("network", None, False, ("retry",)),
        ("config_error", None, False, ("abandon-human",)),
    ],
)  # fmt: skip
def test_class_and_kind_choose_the_acceptable_actions(
    tmp_path: Path, failure_class: str, kind: str | None, warranted: bool,
    actions: tuple[str, ...],
) -> None:  # fmt: skip
    _write(tmp_path, "case", _ci_label(failure_class=failure_class, kind=kind))
    (case,) = load_corpus(tmp_path)
    assert case.label.failure_class == failure_class
    assert case.label.model_call_warranted is warranted
    assert case.label.acceptable_actions == actions


@pytest.mark.parametrize("failure_class", sorted(set(ACCEPTABLE_ACTIONS) - {"code"} - {
    "code/mechanical", "code/dependency"}))  # fmt: skip
def test_each_infra_class_accepts_what_the_deterministic_infra_verdict_does(
    failure_class: str,
) -> None:
    """The table is the recovery layer's answer, written down: a change to
    ``infra_decision`` that this table does not follow fails here."""
    failure = Failure(check=CHECK_NAME, output="", ticket_title="t", infra=failure_class)
    decision = infra_decision(failure, FRESH_CAPS)
    assert (decision.verdict.action,) == ACCEPTABLE_ACTIONS[failure_class]


@pytest.mark.parametrize(
    ("label", "problem"),
    [
        (_ci_label(failure_class="flaky"), "failure_class: Input should be 'code', 'network'"),
        (_ci_label(root_cause=[]), "root_cause: expected at least 1 item(s) (got [])"),
        (_ci_label(root_cause=[""]), "root_cause[0]:"),
        (_ci_label(family=None), "family: required key is missing"),
        (_ci_label(kind="cosmetic"), "kind: Input should be 'mechanical' or 'dependency'"),
        (_ci_label(failure_class="network", kind="mechanical"),
         "kind: 'mechanical' applies to a code failure only"),
        (_ci_label(rootcause=["x"]), "rootcause: unknown key (not allowed here)"),
    ],
)  # fmt: skip
def test_a_bad_ci_logs_label_is_refused_naming_its_file_and_key(
    tmp_path: Path, label: dict[str, Any], problem: str
) -> None:
    _write(tmp_path, "01-good", _ci_label())
    path = _write(tmp_path, "02-bad", label)
    with pytest.raises(CorpusError) as refused:
        load_corpus(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"{path}: "), message
    assert problem in message, message


def test_a_ci_logs_case_directory_that_is_no_case_id_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "Case One", _ci_label())
    with pytest.raises(CorpusError, match="the directory name 'Case One' is not a case id"):
        load_corpus(tmp_path)
    assert path.is_file()


def test_a_corpus_mixing_the_two_formats_is_refused_naming_one_of_each(tmp_path: Path) -> None:
    own = {
        "id": "a-own", "description": "d", "tool": "pytest", "source": "check",
        "check": "tests", "exit_code": 1, "failure_class": "code",
        "model_call_warranted": True, "acceptable_actions": ["retry"], "root_cause": "x",
    }  # fmt: skip
    own_path = _write(tmp_path, "a-own", own)
    ci_path = _write(tmp_path, "b-ci", _ci_label())
    with pytest.raises(CorpusError) as refused:
        load_corpus(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path}: mixes label formats ({own_path} is this project's, {ci_path} is "
        "ci-logs'); a corpus holds one"
    )
