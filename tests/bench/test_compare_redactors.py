"""`bench/compare_redactors.py`: the corpus measured the way the corpus test measures it,
and a ``--quick`` run that prints one honest row per redactor (no timing asserted).

The libraries it compares against are not dependencies of the project: where they are not
installed their rows say so (with the install command), and our row is measured anyway.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import ROOT, subprocess_env

SCRIPT = ROOT / "bench" / "compare_redactors.py"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("compare_redactors", SCRIPT)
corpus_test = _load(
    "_redact_corpus_for_bench", ROOT / "tests" / "redaction" / "test_redact_corpus.py"
)


def test_the_three_ways_are_the_corpus_tests_own() -> None:
    # The comparison is only worth reading if it measures what the corpus test measures.
    assert bench.CORPUS == corpus_test.CORPUS
    for text in ("token = abc", "a\nb\n", "", "x\r\ny"):
        assert bench.as_diff(text) == corpus_test.as_diff(text)
        assert bench.in_log_line(text) == corpus_test.in_log_line(text)
    for output, secrets in (("a [REDACTED] b", ["s1"]), ("a s1 b", ["s1"]), ("s1", ["s1", "s2"])):
        assert bench.gone(output, secrets) == corpus_test._gone(output, secrets)


def test_a_positive_counts_only_when_every_secret_is_gone_and_any_change_alters_a_negative() -> (
    None
):
    positives: list[dict[str, Any]] = [
        {"id": "p1", "provider": "a", "text": "k=S1 and S2", "secrets": ["S1", "S2"]},
        {"id": "p2", "provider": "b", "text": "k=S3", "secrets": ["S3"]},
    ]
    negatives: list[dict[str, Any]] = [
        {"id": "n1", "text": "plain"},
        {"id": "n2", "text": "k=safe"},
    ]
    corpus = bench.Corpus(positives=positives, negatives=negatives)
    texts = corpus.texts()
    # Removes S1 and S3 everywhere, S2 only in log lines; touches one negative.
    outputs = {}
    for text in texts:
        out = text.replace("S1", "").replace("S3", "").replace("safe", "[REDACTED]")
        if not text.startswith("2026-"):
            outputs[text] = out
        else:
            outputs[text] = out.replace("S2", "")
    scores = bench.score(corpus, outputs)
    assert scores.as_written == 0.5  # p1 keeps S2
    assert scores.diff_lines == 0.5
    assert scores.log_line == 1.0  # each secret in its own log line, all removed
    assert scores.negatives_altered == 0.5
    assert scores.caught == {("p2", "as written"), ("p1", "log line"), ("p2", "log line")}


def test_spans_are_cut_on_utf8_bytes_and_merged_where_they_overlap() -> None:
    text = "é key=SECRET tail"  # "é" is two bytes: the native scanner's offsets are bytes
    start = len("é key=".encode())
    end = start + len("SECRET")
    assert bench._redact_byte_spans(text, [(start, end)]) == "é key=[REDACTED] tail"
    assert bench._redact_byte_spans(text, [(start, end - 2), (start + 1, end)]) == (
        "é key=[REDACTED] tail"
    )
    assert bench._redact_byte_spans(text, []) == text


ROW = re.compile(
    r"^(?P<name>.{22}) +(?P<written>\d+\.\d)% +(?P<diff>\d+\.\d)% +(?P<log>\d+\.\d)% +"
    r"(?P<neg>\d+\.\d)% +(?P<prep>\d+\.\d\d) +(?P<corpus>\d+\.\d\d) +(?P<ratio>\d+\.\dx) +"
    r"(?P<mibs>\d+\.\d\d) +(?P<altered>[\d,]+)$"
)


def _rate(hits: int, total: int) -> str:
    return f"{hits / total:.1%}"[:-1]


# Where every library is installed the quick run compiles kingfisher's catalog four times
# (about 20 s alone; more on a busy machine); without them it takes a second or two.
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_quick_run_prints_a_row_per_redactor_and_ours_is_measured_as_the_corpus_test_would() -> (
    None
):
    if not bench.CORPUS.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing under CI: {bench.CORPUS}")
        pytest.skip(f"the shared corpus is not here ({bench.CORPUS}); it lives beside the project")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--gaps"], cwd=ROOT, env=subprocess_env(),
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    lines = out.splitlines()
    header = lines.index(bench.HEADER)
    rows = lines[header + 1 : header + 1 + len(bench.REDACTORS)]
    assert [r[:22].rstrip() for r in rows] == list(bench.REDACTORS), out
    assert lines[header + 1 + len(bench.REDACTORS)].startswith("target "), out
    # recall has targets; corpus negatives altered no longer do (the 15 % is retired)
    assert "<=" not in lines[header + 1 + len(bench.REDACTORS)], out

    measured = {}
    for row in rows:
        name = row[:22].rstrip()
        if row[22:].lstrip().startswith("skipped: "):
            assert name != "ours", out
            assert "pip install " in row, row  # it says how to install the library
            continue
        match = ROW.match(row)
        assert match, row
        for key in ("written", "diff", "log", "neg"):
            assert 0.0 <= float(match[key]) <= 100.0, row
        measured[name] = match
    assert "ours" in measured

    # Our row holds the corpus test's own counts over the same quick selection.
    samples = bench.load_corpus(bench.CORPUS, bench.QUICK_STRIDE)
    positives, negatives = samples.positives, samples.negatives
    redact = bench.redact
    gone = bench.gone
    expected = {
        "written": sum(gone(redact(s["text"]), s["secrets"]) for s in positives),
        "diff": sum(gone(redact(corpus_test.as_diff(s["text"])), s["secrets"]) for s in positives),
        "log": sum(
            all(gone(redact(corpus_test.in_log_line(x)), [x]) for x in s["secrets"])
            for s in positives
        ),
    }
    ours = measured["ours"]
    for key, hits in expected.items():
        assert ours[key] == _rate(hits, len(positives)), (key, out)
    altered = sum(redact(s["text"]) != s["text"] for s in negatives)
    assert ours["neg"] == _rate(altered, len(negatives)), out
    assert f"{len(positives)} positives, {len(negatives)} negatives" in out
    log_lines = int(re.search(r"ordinary log [\d.]+ MiB, ([\d,]+) lines", out)[1].replace(",", ""))  # type: ignore[index]
    assert int(ours["altered"].replace(",", "")) <= log_lines, out

    # --gaps: one entry per measured library, counting exactly the positives listed under it.
    gap_at = lines.index("positives a library removes and ours does not, by provider (way: count)")
    entries = {}
    for line in lines[gap_at + 1 :]:
        head = re.match(r"^  (\S.*?): (\d+) more(, not listed: .*)?$", line)
        if head:
            entries[head[1]] = [int(head[2]), 0, bool(head[3])]
        elif line.startswith("    "):
            per = re.match(r"^    \S.* \((as written|log line)\) (\d+)(: .+)?$", line)
            assert per, line
            entries[list(entries)[-1]][1] += int(per[2])
        else:
            break
    assert sorted(entries) == sorted(name for name in measured if name != "ours"), out
    for name, (total, listed, unlisted) in entries.items():
        assert listed == (0 if unlisted else total), (name, out)

    conclusion = next(line for line in lines if line.startswith("conclusion: "))
    others = [name for name in measured if name != "ours"]
    if others:
        for name in others:
            assert name in conclusion, conclusion
    else:
        assert "no library measured" in conclusion, conclusion


@pytest.mark.slow
def test_a_library_that_is_not_installed_is_skipped_with_its_install_command(
    tmp_path: Path,
) -> None:
    if not bench.CORPUS.is_file():
        pytest.skip(f"the shared corpus is not here ({bench.CORPUS})")
    # Packages that fail to import as a missing one does, ahead of any installed copy.
    for package in ("detect_secrets", "kingfisher_sdk"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(
            f"raise ImportError('not here', name={package!r})\n", encoding="utf-8"
        )
    only = ["detect-secrets (file)", "kingfisher (SDK)", "ours after kingfisher"]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", *(f"--only={name}" for name in only)],
        cwd=ROOT, env=subprocess_env(PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}"),
        capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    header = lines.index(bench.HEADER)
    assert ROW.match(lines[header + 1]) and lines[header + 1].startswith("ours "), result.stdout
    assert lines[header + 2 : header + 5] == [
        f"{'detect-secrets (file)':22} skipped: not installed (detect_secrets): "
        ".venv/bin/pip install bc-detect-secrets",
        f"{'kingfisher (SDK)':22} skipped: not installed: "
        ".venv/bin/pip install kingfisher-secret-scanner",
        f"{'ours after kingfisher':22} skipped: not installed: "
        ".venv/bin/pip install kingfisher-secret-scanner",
    ]
    assert "conclusion: no library measured (none installed or selected)" in result.stdout
