"""`bench/redaction_negatives.py`: its steps are ``redact``'s steps (so "the first rule
that altered it" names a rule ``redact`` runs), the name rules alone leave token shapes and
random runs alone, a carrier is told by a positive's secret that goes even alone in a plain
log line, a log is read as the bundle reads it and counted line by line both ways (the
quick way of counting "line by line" agrees with redacting every line alone), and a run
prints its figures."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.redaction import REDACTED, redact

from conftest import ROOT, subprocess_env

SCRIPT = ROOT / "bench" / "redaction_negatives.py"
# (loaded from its file: ``bench`` is also the name of this test directory; registered,
# so that its dataclasses can find their module)
_spec = importlib.util.spec_from_file_location("redaction_negatives", SCRIPT)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["redaction_negatives"] = bench
_spec.loader.exec_module(bench)

R = REDACTED
TEXTS = [
    "nothing to see here",
    "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz1234",
    "got ghp_abcdefghijklmnopqrstuvwxyz0123456789 from upstream",
    "blob Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1O end",
    "curl -u admin:hunter22 https://user:pa55word@example.com/x",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "kind: Secret\ndata:\n  token: c2VjcmV0LXZhbHVlLWhlcmU=\n",
    '<add key="ClearTextPassword" value="abc123!" />\nsee abc123! again',
    "notion_token = 'secret_oPp4m4V04lEWqgLGyh?N7b8H9JLANmyE1AYl2'",
]


def _all_stages(text: str) -> str:
    found: set[str] = set()
    for stage in bench.STAGES:
        text = stage.apply(text, found)
    return text


@pytest.mark.parametrize("text", TEXTS)
def test_the_stages_together_are_redact(text: str) -> None:
    assert _all_stages(text) == redact(text)


def test_the_stages_together_are_redact_on_the_corpus() -> None:
    if not bench.CORPUS.is_file():
        pytest.skip(f"the shared corpus is not here ({bench.CORPUS}); it lives beside the project")
    corpus = bench.load_corpus(bench.CORPUS, 1)
    for sample in corpus.negatives + corpus.positives[::5]:
        assert _all_stages(sample["text"]) == redact(sample["text"]), sample["id"]


def test_first_rule_and_names_alone() -> None:
    assert bench.first_rule("nothing to see here") is None
    assert bench.first_rule(TEXTS[2]) == "token shape"
    assert bench.first_rule(TEXTS[3]) == "random-looking run"
    assert bench.first_rule(TEXTS[4]) == "credential in a URL, header or -u"
    # Without token shapes and entropy, a bare key and a random run stay; a named one goes.
    assert bench.names_alone(TEXTS[2]) == TEXTS[2]
    assert bench.names_alone(TEXTS[3]) == TEXTS[3]
    assert bench.names_alone(TEXTS[1]) == "export OPENAI_API_KEY=[REDACTED]"


def test_plain_line_secrets_are_the_ones_redact_removes_with_no_name_beside_them() -> None:
    positives = [
        # a vendor prefix: removed in a plain log line
        {"secrets": ["ghp_abcdefghijklmnopqrstuvwxyz0123456789"]},
        # only its name told it: kept in a plain log line, so no carrier is told by it
        {"secrets": ["hunter2hunter2"]},
        # a bare word, however long, and a short value are never taken
        {"secrets": ["passwordpassword", "sk-abc"]},
    ]
    assert bench.plain_line_secrets(positives) == {"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}


# ---- real CI logs ------------------------------------------------------------------------


def test_a_log_is_read_as_the_bundle_reads_it() -> None:
    # colours and a progress meter's stale frames go; a no-break space is a space; bad
    # bytes are U+FFFD; the line count is the original's
    raw = b"\x1b[31mFAILED\x1b[0m a\xc2\xa0b\n10%\r50%\r100%\nbad \xff\n"
    assert bench.reader_view(raw) == "FAILED a b\n100%\nbad \ufffd\n"


def test_lines_are_the_pieces_between_line_breaks() -> None:
    assert bench.log_lines("a\nb\n") == ["a", "b"]
    assert bench.log_lines("a\nb") == ["a", "b"]
    assert bench.log_lines("a\n\nb\n") == ["a", "", "b"]
    assert bench.log_lines("") == [""]
    # a private-key block becomes one mark: every line from it on counts as altered
    assert bench.altered_lines(["a", "b", "c"], ["a", "B", "c"]) == [1]
    assert bench.altered_lines(["a", "k1", "k2", "k3", "z"], ["a", R, "z"]) == [1, 2, 3, 4]


def test_whole_log_and_line_by_line_count_what_each_way_alters() -> None:
    text = (
        "plain line\n"
        "export DB_PASSWORD=Zq8Wm2Xn4Kp6\n"
        "mysql -pZq8Wm2Xn4Kp6 app\n"  # the found value, repeated: whole log only
        "got ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
        "plain line\n"
    )
    figures = bench.LogFigures()
    bench.measure_log("t", text, figures, keep_examples=5)
    assert (figures.logs, figures.lines) == (1, 5)
    assert figures.whole_log == 3
    assert figures.line_by_line == 2
    assert figures.by_rule == {
        "value assigned to a secret name": 1,
        "a found value repeated": 1,
        "token shape (vendor prefix, JWT ...)": 1,
    }
    (example,) = figures.examples["a found value repeated"]
    assert example == ("t", 3, "mysql -pZq8Wm2Xn4Kp6 app", f"mysql -p{R} app")


def test_a_line_altered_only_by_another_line_is_named_so() -> None:
    # the value on the line after its <password>: alone, that line is nothing
    lines = ["  Zq8Wm2Xn4Kp6Lr0T"]
    assert bench.rule_of_lines(lines) == [bench.ELSEWHERE]
    text = "<password>\n  Zq8Wm2Xn4Kp6Lr0T\n</password>\n"
    figures = bench.LogFigures()
    bench.measure_log("t", text, figures)
    assert (figures.whole_log, figures.line_by_line) == (1, 0)
    assert figures.by_rule == {bench.ELSEWHERE: 1}


def test_line_by_line_counts_what_a_certificate_block_kept_whole() -> None:
    # Inside a certificate a random line is public; alone, nothing says so.
    body = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa"
    text = f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
    figures = bench.LogFigures()
    bench.measure_log("t", text, figures)
    assert (figures.whole_log, figures.line_by_line) == (0, 1)


def test_the_quick_line_by_line_count_is_the_exhaustive_one() -> None:
    # Every kind of line the quick way reasons about: context that adds (a repeated
    # value, an XML value on the next line, a block), context that keeps (a
    # certificate), lines that alter alone, and lines no rule touches.
    text = "\n".join(
        [
            "step 1 of 9: compiling",
            "export API_TOKEN=Zq8Wm2Xn4Kp6Lr",
            "echo Zq8Wm2Xn4Kp6Lr",
            "<secret>",
            "  Yx7Vb3Nm9Qw2Er",
            "</secret>",
            "-----BEGIN CERTIFICATE-----",
            "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa",
            "-----END CERTIFICATE-----",
            "-----BEGIN PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "-----END PRIVATE KEY-----",
            "tests/test_x.py::test_get[paths0-conf_rules0-exclude_rules0] PASSED",
            "got xoxb-1234567890-abcdefgh from the bot",
            "AddAuthTokenToUsers: migrating",
        ]
    )
    before = bench.log_lines(text)
    whole = bench.altered_lines(before, bench.log_lines(redact(text)))
    assert bench.altered_alone(text, whole) == bench.exhaustive_altered_alone(text)


@pytest.mark.slow
def test_the_quick_line_by_line_count_is_the_exhaustive_one_on_real_logs() -> None:
    paths = bench.log_paths(bench.CI_LOGS)
    if not paths:
        pytest.skip(
            f"the real CI logs are not here ({bench.CI_LOGS}); they live beside the project"
        )
    # the logs under 1 MiB: every line redacted alone stays a few seconds
    for path in (p for p in paths if p.stat().st_size < 1 << 20):
        text = bench.reader_view(path.read_bytes())
        before = bench.log_lines(text)
        whole = bench.altered_lines(before, bench.log_lines(redact(text)))
        assert bench.altered_alone(text, whole) == bench.exhaustive_altered_alone(text), path


@pytest.mark.slow
def test_a_run_over_the_corpus_prints_the_figures() -> None:
    if not bench.CORPUS.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing under CI: {bench.CORPUS}")
        pytest.skip(f"the shared corpus is not here ({bench.CORPUS}); it lives beside the project")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--corpus", "--list"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    recall = dict(re.findall(r"recall (as written|diff lines|log line): +(\d+\.\d)%", out))
    assert sorted(recall) == ["as written", "diff lines", "log line"], out
    altered = re.search(r"altered by redact: +(\d+) ", out)
    alone = re.search(r"altered by the names alone: +(\d+) ", out)
    twins = re.search(r"twins of a true positive: +(\d+) ", out)
    carriers = re.search(r"carriers of a positive's secret: +(\d+) ", out)
    floor = re.search(r"floor \(any of the three\): +(\d+) ", out)
    assert altered and alone and twins and carriers and floor, out
    assert 0 < int(twins.group(1)) <= int(altered.group(1))
    assert 0 < int(alone.group(1)) <= int(altered.group(1))
    # the floor is a union: at least its largest part, at most their sum, never more than
    # what redact alters (each part is something redact alters)
    parts = [int(m.group(1)) for m in (alone, twins, carriers)]
    assert max(parts) <= int(floor.group(1)) <= min(sum(parts), int(altered.group(1)))
    # one listed line per altered negative, by id
    assert len(re.findall(r"^s\d{4} ", out, flags=re.MULTILINE)) == int(altered.group(1))


def test_a_run_without_the_data_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "CI_LOGS", tmp_path / "ci-logs")
    monkeypatch.setattr(bench, "CORPUS", tmp_path / "secret-samples.json")
    assert bench.main([]) == 2
    err = capsys.readouterr().err
    assert f"the real CI logs are not here: {tmp_path / 'ci-logs'}" in err
    assert f"the shared corpus is not here: {tmp_path / 'secret-samples.json'}" in err
    # one of the two is enough to run
    (tmp_path / "ci-logs" / "01-x").mkdir(parents=True)
    (tmp_path / "ci-logs" / "01-x" / "log.txt").write_bytes(b"ok\nexport TOKEN=Zq8Wm2Xn4K\n")
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert "1 logs, 2 lines" in out
    assert "lines altered, whole log:          1  50.00%" in out
