"""The eval measured as learning (issue 44, ``eval.learning``): the corpus decided twice,
the first pass's proven decisions promoted through the playbook's own files in between.

A small corpus written here (pytest's and ruff's output, a full disk) is enough to prove
the passes: a failure decided right once makes no call the second time, one whose first
decision was wrong is not learned, a signature shared by two failures with different
answers is counted as a cross-case match. A few real CI logs (``../shared/data/ci-logs``,
skipped when absent) show the same on logs nobody here wrote, found and padded.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.domain.config import ContextLimits
from orchestrator.domain.playbook import EntryStatus, parse_entry
from orchestrator.eval import learning
from orchestrator.eval.corpus import Case, CaseLabel, load_corpus, write_case
from orchestrator.eval.layers import DEFAULT_TICKET, TICKET_FILE
from orchestrator.eval.learning import ModelVerdict, judge, measure
from orchestrator.eval.offline import CaseResult, evaluate, evaluate_padded
from orchestrator.eval.report import render_learning

ROOT = Path(__file__).resolve().parents[2]
_PLACES = (ROOT.parent / "shared", ROOT.parent.parent / "shared")
CI_LOGS = next((p / "data" / "ci-logs" for p in _PLACES if (p / "data" / "ci-logs").is_dir()), None)

PYTEST_FAILED = """============ test session starts ============
collected 4 items

tests/test_geometry.py ...F

=== FAILURES ===
___ test_area ___

    def test_area():
>       assert area({a}, {b}) == {want}
E       assert {got} == {want}

tests/test_geometry.py:{line}: AssertionError
=== short test summary info ===
FAILED tests/test_geometry.py::test_area - assert {got} == {want}
=== 1 failed, 3 passed in {secs}s ===
"""
DISK_FULL = (
    "building wheel\ncopying files\nerror: [Errno 28] No space left on device: '/tmp/b/x.o'\n"
)
RUFF_F401 = (
    "ruff check .\nsrc/app.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n"
    "[*] 1 fixable with the `--fix` option.\n"
)
CODE_FIX = ("retry", "escalate-model", "switch-engine", "split")


def _label(case_id: str, failure_class: str, actions: tuple[str, ...], root: str) -> CaseLabel:
    return CaseLabel(
        id=case_id, description=case_id, tool="pytest", source="check", check="tests",
        exit_code=1, failure_class=failure_class, model_call_warranted=failure_class == "code",
        acceptable_actions=actions, root_cause=root,
    )  # fmt: skip


def _pytest_log(a: int, b: int, got: int, want: int, line: int, secs: str) -> bytes:
    text = PYTEST_FAILED.format(a=a, b=b, got=got, want=want, line=line, secs=secs)
    return text.encode()


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """Five failures: a failing assertion, the same one on another day (other numbers), the
    same log labelled as something else (a signature two answers share), a full disk, and
    a lint finding whose only acceptable action is a plan only a model writes."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / TICKET_FILE).write_text(DEFAULT_TICKET)
    write_case(corpus, _label("01-assert", "code", CODE_FIX, "assert 3 == 4"),
               _pytest_log(1, 2, 3, 4, 12, "0.12"))  # fmt: skip
    write_case(corpus, _label("02-assert-again", "code", CODE_FIX, "assert 7 == 9"),
               _pytest_log(3, 4, 7, 9, 31, "1.70"))  # fmt: skip
    write_case(corpus, _label("03-assert-as-config", "config_error", ("abandon-human",),
               "assert 3 == 4"), _pytest_log(1, 2, 3, 4, 12, "0.12"))  # fmt: skip
    write_case(corpus, _label("04-disk-full", "resource_exhausted", ("abandon-human",),
               "No space left on device"), DISK_FULL.encode())  # fmt: skip
    write_case(corpus, _label("05-plan-only", "code", ("mechanical-fix",), "F401"),
               RUFF_F401.encode())  # fmt: skip
    return corpus


def _passes(corpus: Path) -> tuple[tuple[Case, ...], tuple[CaseResult, ...], learning.Learning]:
    cases = load_corpus(corpus)
    found, _ = evaluate(cases, corpus, ContextLimits())
    return cases, found, measure(cases, found)


def test_a_failure_decided_right_once_makes_no_call_the_second_time(small_corpus: Path) -> None:
    _, found, measured = _passes(small_corpus)
    first = {r.id: r for r in found}
    # The first pass asks the model about every code failure the disk is not.
    assert {r.id for r in found if r.model_call_made} == {
        "01-assert", "02-assert-again", "03-assert-as-config", "05-plan-only",
    }  # fmt: skip
    assert first["04-disk-full"].decided_by == "infra"
    # The same failure on another day has the same signature (numbers masked).
    assert first["01-assert"].signature_key == first["02-assert-again"].signature_key
    pair = measured.found
    proofs = {p.id: p for p in pair.proofs}
    assert proofs["01-assert"].proven and proofs["01-assert"].decision == {
        "action": "retry", "summary": learning._SUMMARY,
    }  # fmt: skip
    # Both agree into one entry (two lines of provenance), promoted.
    assert proofs["01-assert"].entry == proofs["02-assert-again"].entry is not None
    assert pair.entries_promoted == 1
    assert pair.second_calls_for_proven == ()
    assert (pair.first.calls, pair.second.calls) == (4, 1)
    assert pair.second.decided_by_playbook == 3
    # An infrastructure decision proved right needs no entry: it makes no call anyway.
    assert proofs["04-disk-full"].proven and proofs["04-disk-full"].entry is None
    assert "before the playbook" in proofs["04-disk-full"].why
    # The passes differ only in who decides: class and root cause are the log's.
    assert pair.first.class_right == pair.second.class_right
    assert pair.first.root_cause_in_bundle == pair.second.root_cause_in_bundle
    assert pair.second.tokens < pair.first.tokens


def test_an_unproven_decision_is_not_learned_and_still_asks_the_model(small_corpus: Path) -> None:
    _, _, measured = _passes(small_corpus)
    pair = measured.found
    plan_only = next(p for p in pair.proofs if p.id == "05-plan-only")
    assert not plan_only.proven and plan_only.entry is None
    assert "plan" in plan_only.why
    # A model's abandon-human (all a config error's label accepts) ends the ticket:
    # nothing verifies it, and the run never learns it.
    assert [p.id for p in pair.proofs if not p.proven] == ["03-assert-as-config", "05-plan-only"]
    assert "ends the ticket" in next(p.why for p in pair.proofs if p.id == "03-assert-as-config")
    second_calls = pair.second.calls
    assert second_calls == 1  # 05-plan-only, asked again


def test_a_signature_two_answers_share_is_a_cross_case_match(small_corpus: Path) -> None:
    """The same log labelled config_error: not learned (a person is all its label
    accepts), and the entry 01 and 02 taught (retry) decides it wrongly: the negative
    check counts it."""
    _, _, measured = _passes(small_corpus)
    pair = measured.found
    misread = next(p for p in pair.proofs if p.id == "03-assert-as-config")
    assert not misread.proven and misread.entry is None
    # 01 and 02 (the same failure on another day) share an entry, whose decision fits
    # both; 03 is decided by it too, and its label does not accept that.
    assert [(c.case, c.acceptable) for c in pair.cross_case] == [
        ("01-assert", True), ("02-assert-again", True), ("03-assert-as-config", False),
    ]  # fmt: skip
    assert {c.learned_from for c in pair.cross_case} == {("01-assert", "02-assert-again")}
    assert pair.shared_signatures == (
        "01-assert (code), 02-assert-again (code), 03-assert-as-config (config_error)",
    )
    entry = pair.cross_case[0].entry
    # A decided case the label does not accept, by a learned entry: shown as such.
    assert pair.second.playbook_not_acceptable == (f"03-assert-as-config: {entry} decided retry",)
    assert "cross-case matches: 3 (1 deciding what the label does not accept)" in (
        render_learning(measured)
    )


def test_the_entries_are_the_run_s_files_and_the_directory_goes(
    small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = load_corpus(small_corpus)
    found, _ = evaluate(cases, small_corpus, ContextLimits())
    labels = {c.label.id: c.label for c in cases}
    proofs = [judge(r, labels[r.id], None) for r in found]
    scratch = tmp_path / "project"
    playbook, _, learned_from, promoted, notes = learning.learn(found, proofs, scratch)
    files = sorted((scratch / "playbook").glob("*.toml"))
    assert [f.stem for f in files] == list(learned_from) and promoted == 1 and notes == ()
    entry = parse_entry(files[0].read_text(), str(files[0]))
    assert entry.status is EntryStatus.PROMOTED and entry.promoted_by == "orchestrator eval"
    assert entry.match.signature == next(r.signature for r in found if r.id == "01-assert")
    assert [p.ticket_id for p in entry.provenance] == ["01-assert", "02-assert-again"]
    assert len(playbook) == 1 + 1  # the learned entry and the built-in commit-order one
    # measure() writes its store in a temporary directory and removes it.
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    measure(cases, found)
    assert list(temp.iterdir()) == []


def test_live_verdicts_are_learned_only_when_the_label_accepts_them(small_corpus: Path) -> None:
    cases, found, _ = _passes(small_corpus)
    live = {
        "01-assert": ModelVerdict(
            action="escalate-model",
            verdict={"action": "escalate-model", "summary": "needs the stronger model"},
            acceptable=True,
        ),
        "02-assert-again": ModelVerdict(
            action="abandon-human",
            verdict={"action": "abandon-human", "summary": "no"},
            acceptable=False,
        ),
        "03-assert-as-config": ModelVerdict(
            action="abandon-human",
            verdict={"action": "abandon-human", "summary": "config"},
            acceptable=True,
        ),
        "05-plan-only": ModelVerdict(action="abandon-human", acceptable=False),
    }
    measured = measure(cases, found, live=live)
    proofs = {p.id: p for p in measured.found.proofs}
    assert proofs["01-assert"].proven and proofs["01-assert"].entry is not None
    assert not proofs["02-assert-again"].proven and proofs["02-assert-again"].entry is None
    assert "abandon-human" in proofs["02-assert-again"].why
    assert proofs["05-plan-only"].why == "the model's reply was not a valid verdict"
    assert not proofs["03-assert-as-config"].proven  # right, but a person's: not learned
    assert "ends the ticket" in proofs["03-assert-as-config"].why
    assert (
        "the model was not asked"
        in judge(next(r for r in found if r.id == "05-plan-only"), cases[-1].label, {}).why
    )
    assert not measured.offline
    assert measured.found.second_calls_for_proven == ()
    # 02 shares 01's signature: 01's promoted entry decides it too, with the model's answer.
    second = measured.found.second
    assert second.calls == 1 and second.decided_by_playbook == 3


def test_the_command_prints_and_carries_the_learning_passes(
    small_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)  # no config.toml here: the default caps apply
    assert main(["eval", "--corpus", str(small_corpus)]) == 0
    table = capsys.readouterr().out
    assert "| 2nd as found |" in table
    assert "second-pass calls for proven failures: 0 (goal 0)" in table
    assert "offline: a model call's decision is taken as the label's first acceptable" in table
    assert main(["eval", "--corpus", str(small_corpus), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    learned = document["learning"]
    assert learned["offline"] is True and learned["padded"] is None
    assert (learned["found"]["first"]["calls"], learned["found"]["second"]["calls"]) == (4, 1)
    assert learned["found"]["second_calls_for_proven"] == []
    case = next(c for c in document["cases"] if c["id"] == "01-assert")
    assert case["signature_key"] and case["signature"][0].startswith("> assert area(<n>")
    assert "failure" not in case  # the failure kept for the second pass is not reported


@pytest.mark.slow
def test_the_project_s_own_corpus_learns_what_the_built_in_playbook_does_not_know(
    few_cases: Path,
) -> None:
    """Two shapes built by running the real lint (and their padded twins): the squash the
    built-in pattern entry decides needs no entry; the other commit-order failure is asked
    once and learned, the padded twin agreeing into the same entry."""
    _, _, measured = _passes(few_cases)
    pair = measured.found
    proofs = {p.id: p for p in pair.proofs}
    assert proofs["commit-order-squash"].entry == "commit-order-squash"
    assert proofs["commit-order-squash"].decision is None
    learned = proofs["commit-order-two"].entry
    assert learned is not None and proofs["commit-order-two-padded"].entry == learned
    assert pair.entries_promoted == 1 and pair.cross_case == ()
    assert pair.first.calls == 2 and pair.second.calls == 0
    assert pair.second_calls_for_proven == ()


# Real CI logs: three code failures of different tools, an infrastructure one.
CI_CASES = ("04-rustc-e0425-not-in-scope", "56-mypy-gha", "49-gha-tsc-ts2307",
            "60-docker-pull-rate-limited")  # fmt: skip


@pytest.fixture(scope="module")
def ci_cases() -> tuple[Path, tuple[Case, ...]]:
    if CI_LOGS is None:
        pytest.skip(f"no ci-logs corpus beside the project (looked in {_PLACES})")
    cases = load_corpus(CI_LOGS)
    chosen = tuple(c for c in cases if c.label.id in CI_CASES)
    assert len(chosen) == len(CI_CASES), [c.label.id for c in chosen]
    return CI_LOGS, chosen


def test_real_ci_logs_learned_as_found_are_decided_with_no_call_when_padded(
    ci_cases: tuple[Path, tuple[Case, ...]],
) -> None:
    corpus, cases = ci_cases
    found, _ = evaluate(cases, corpus, ContextLimits())
    padded = evaluate_padded(cases, corpus, ContextLimits(), pad_bytes=256 * 1024)
    measured = measure(cases, found, padded)
    code = {c.label.id for c in cases if c.label.failure_class == "code"}
    assert {r.id for r in found if r.model_call_made} == code
    for pair in (measured.found, measured.padded):
        assert pair is not None
        assert pair.second_calls_for_proven == () and pair.second.calls == 0
        assert pair.cross_case == () and pair.shared_signatures == ()
    # The same failure in 512 KiB of other output: the same signature, so the entry
    # learned from the log as found decides it with no call.
    assert measured.signature_changed == ()
    assert measured.cross_learned == measured.cross_matched == len(code)
    assert measured.cross is not None and measured.cross.calls == 0
