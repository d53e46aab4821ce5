"""The padding ``eval --pad`` buries a log in: ordinary build output, seeded, free of the
words a failure is told by, in the log's own line ending, the log itself untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.offline import evaluate_padded
from orchestrator.eval.padding import (
    BOM,
    ERROR_VOCABULARY,
    PAD_SEED,
    STAMPS,
    newline_of,
    pad_log,
    padding,
)

KIB = 1024


def test_the_same_seed_and_salt_give_the_same_bytes_and_others_other_bytes() -> None:
    first = padding(64 * KIB, seed=7, salt="01-case:before")
    assert first == padding(64 * KIB, seed=7, salt="01-case:before")
    assert first != padding(64 * KIB, seed=8, salt="01-case:before")
    assert first != padding(64 * KIB, seed=7, salt="01-case:after")


def test_padding_is_whole_lines_of_about_the_size_asked() -> None:
    pad = padding(256 * KIB, seed=PAD_SEED, salt="size")
    assert 256 * KIB <= len(pad) < 256 * KIB + 16 * KIB
    assert pad.endswith(b"\n")
    assert padding(0, seed=PAD_SEED, salt="size") == b""


@pytest.mark.parametrize("seed", [PAD_SEED, 1, 2, 3])
def test_padding_carries_no_error_vocabulary(seed: int) -> None:
    text = b"".join(
        padding(512 * KIB, seed=seed, salt=f"case-{n}") for n in range(len(STAMPS) * 2)
    ).decode("utf-8")
    lowered = text.lower()
    found = {word for word in ERROR_VOCABULARY if word in lowered}
    assert found == set()
    # Nor a line shaped like a failure: pytest's E lines, npm's ERR!, a non-zero exit.
    assert not re.search(r"^(E |F |npm ERR|\S+:\d+:\d+: )", text, re.MULTILINE)


def test_padding_is_varied_build_output() -> None:
    text = padding(1024 * KIB, seed=PAD_SEED, salt="variety").decode("utf-8")
    for shape in (
        r"   Compiling \S+ v\d+\.\d+\.\d+", r"npm http fetch GET 200 ", r"Collecting \S+==",
        r"\[INFO\] Downloading from central: ", r"> Task :\w+:compileJava",
        r"\[\s*\d+%\] Building CXX object", r"::test_\w+\[\d+\] PASSED", r"--- PASS: Test",
        r"Digest: sha256:[0-9a-f]{64}",
    ):  # fmt: skip
        assert re.search(shape, text), shape
    lines = text.splitlines()
    assert len(set(lines)) > len(lines) // 2  # not one block repeated


@pytest.mark.parametrize(
    ("log", "ending"),
    [
        (b"one\ntwo\n", b"\n"),
        (b"one\r\ntwo\r\nthree\n", b"\r\n"),
        (b"one\r\r\ntwo\r\r\n", b"\r\r\n"),
        (b"no line ending at all", b"\n"),
        (b"progress\r50%\r100%\nnext\n", b"\n"),
    ],
)
def test_the_log_line_ending_is_found(log: bytes, ending: bytes) -> None:
    assert newline_of(log) == ending


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r\r\n"])
def test_a_padded_log_is_the_log_untouched_between_padding_in_its_line_ending(
    ending: bytes,
) -> None:
    log = ending.join([b"build step one", b"real failure: the cause", b"tail"]) + ending
    padded = pad_log(log, size=32 * KIB, seed=PAD_SEED, salt="c")
    before, found, after = padded.partition(log)
    assert found == log
    assert 32 * KIB <= len(before) and 32 * KIB <= len(after)
    for side in (before, after):
        lines = side.split(b"\n")
        assert lines[-1] == b""
        assert all(line.endswith(ending[:-1]) and not line.endswith(ending[:-1] + b"\r")
                   for line in lines[:-1])  # fmt: skip


def test_a_log_without_a_final_newline_ends_its_last_line_before_the_padding() -> None:
    padded = pad_log(b"one\r\nlast line", size=KIB, seed=PAD_SEED, salt="c")
    assert b"one\r\nlast line\r\n" in padded


def test_a_byte_order_mark_stays_at_the_very_start() -> None:
    padded = pad_log(BOM + b"log line\n", size=KIB, seed=PAD_SEED, salt="c")
    assert padded.startswith(BOM)
    assert padded.count(BOM) == 1
    assert b"\nlog line\n" in padded


def _ci_case(corpus: Path, case_id: str, log: bytes, root_cause: str) -> None:
    (corpus / case_id).mkdir(parents=True)
    (corpus / case_id / "log.txt").write_bytes(log)
    label = {
        "source_url": "u", "origin": "o", "ci_system": "travis-ci", "project": "p",
        "tool": "pytest", "family": "pytest", "failure_class": "code", "root_cause": [root_cause],
    }  # fmt: skip
    (corpus / case_id / "label.json").write_text(json.dumps(label))


def test_padded_cases_are_evaluated_from_a_temp_dir_leaving_the_corpus_as_it_was(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "corpus"
    log = b"collecting\r\nE   NameError: name 'x' is not defined\r\n1 failed in 0.1s\r\n"
    _ci_case(corpus, "01-name", log, "NameError: name 'x' is not defined")
    before = sorted(
        (p.relative_to(corpus), p.read_bytes()) for p in corpus.rglob("*") if p.is_file()
    )
    cases = load_corpus(corpus)
    (result,) = evaluate_padded(cases, corpus, ContextLimits(), pad_bytes=64 * KIB, seed=3)
    assert result.id == "01-name" and result.padded
    after = sorted(
        (p.relative_to(corpus), p.read_bytes()) for p in corpus.rglob("*") if p.is_file()
    )
    assert after == before
