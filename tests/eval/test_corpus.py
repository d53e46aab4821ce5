"""The corpus itself: enough shapes, each made by a real tool, labelled, and padded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.domain.terminal import plain, plain_bytes
from orchestrator.eval.corpus import CorpusError, load_corpus

from corpus.build import PAD_BYTES, SHAPES, padding


@pytest.mark.slow
def test_at_least_forty_shapes_each_with_a_padded_twin(corpus_dir: Path) -> None:
    cases = load_corpus(corpus_dir)
    ids = {case.label.id for case in cases}
    shapes = {i for i in ids if not i.endswith("-padded")}
    assert len(shapes) >= 40
    assert {f"{i}-padded" for i in shapes} <= ids
    # Every class the issue names is represented by at least one real failure.
    classes = {case.label.failure_class for case in cases}
    assert {"code", "rate_limited", "auth_error", "timeout", "config_error",
            "resource_exhausted", "network", "outage"} <= classes  # fmt: skip


@pytest.mark.slow
def test_each_log_is_the_runners_and_holds_its_root_cause(corpus_dir: Path) -> None:
    for case in load_corpus(corpus_dir):
        text = case.log_path.read_text(errors="replace")
        label = case.label
        # Written by the runner (its header and footer), not typed by hand.
        assert text.startswith("# orchestrator: "), label.id
        assert f"# orchestrator: exit {label.exit_code} after " in text, label.id
        assert label.root_cause in plain(text), label.id  # as a reader sees it (no colours)


@pytest.mark.slow
def test_padded_cases_carry_megabytes_around_the_failure(corpus_dir: Path) -> None:
    before, after = padding()
    for case in load_corpus(corpus_dir):
        if not case.label.padded:
            continue
        raw = case.log_path.read_bytes()
        unpadded = (corpus_dir / case.label.id.removesuffix("-padded") / "log.txt").read_bytes()
        assert len(raw) >= len(unpadded) + PAD_BYTES
        log = plain_bytes(raw)  # as a reader sees it: where the root cause is found
        assert before in log
        cause = case.label.root_cause.encode()
        in_footer = log.index(cause) > log.rindex(b"\n# orchestrator: exit ")
        if case.label.source != "engine" and not in_footer:
            # (A cause the runner's footer states — a timeout, a missing program — is last.)
            # The failure sits between a megabyte of passing tests and a coverage table.
            assert after in log
            assert log.index(before) < log.index(cause) < log.index(after), case.label.id


def test_padding_is_deterministic() -> None:
    assert padding(seed=7, size=4096) == padding(seed=7, size=4096)
    assert padding(seed=7, size=4096) != padding(seed=8, size=4096)


def test_shapes_are_uniquely_named() -> None:
    assert len({s.id for s in SHAPES}) == len(SHAPES)


def _copy_case(corpus_dir: Path, case_id: str, dest: Path) -> Path:
    where = dest / case_id
    where.mkdir(parents=True)
    for name in ("log.txt", "label.json"):
        (where / name).write_bytes((corpus_dir / case_id / name).read_bytes())
    return where


# The refusals need one real case, not the whole corpus: ``few_cases`` builds only its two
# shapes when nothing else in the run asks for the whole (as in the quick tier).
def test_a_bad_label_is_refused_naming_the_case_and_key(few_cases: Path, tmp_path: Path) -> None:
    where = _copy_case(few_cases, "commit-order-two", tmp_path)
    label = json.loads((where / "label.json").read_text())
    label["failure_class"] = "cosmic_rays"
    (where / "label.json").write_text(json.dumps(label))
    with pytest.raises(
        CorpusError, match=r"commit-order-two/label.json: .*unknown class 'cosmic_rays'"
    ):
        load_corpus(tmp_path)

    label["failure_class"] = "code"
    label["acceptable_actions"] = ["retry", "reboot"]
    (where / "label.json").write_text(json.dumps(label))
    with pytest.raises(CorpusError, match=r"unknown action\(s\) \['reboot'\]"):
        load_corpus(tmp_path)


def test_a_case_without_its_log_or_an_empty_corpus_is_refused(
    few_cases: Path, tmp_path: Path
) -> None:
    with pytest.raises(CorpusError, match="no cases"):
        load_corpus(tmp_path)
    where = _copy_case(few_cases, "commit-order-two", tmp_path)
    (where / "log.txt").unlink()
    with pytest.raises(CorpusError, match=r"has no log\.txt"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match="no corpus at"):
        load_corpus(tmp_path / "absent")
