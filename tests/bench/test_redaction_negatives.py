"""`bench/redaction_negatives.py`: its steps are ``redact``'s steps (so "the first rule
that altered it" names a rule ``redact`` runs), the name rules alone leave token shapes and
random runs alone, a carrier is told by a positive's secret that goes even alone in a plain
log line, and a run over the shared corpus prints its figures, the floor the union of three."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from orchestrator.recovery.redact import redact

from conftest import ROOT, subprocess_env

SCRIPT = ROOT / "bench" / "redaction_negatives.py"
# (loaded from its file: ``bench`` is also the name of this test directory)
_spec = importlib.util.spec_from_file_location("redaction_negatives", SCRIPT)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

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
    for _family, stage in bench.STAGES:
        text = stage(text, found)
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


def test_a_run_over_the_corpus_prints_the_figures() -> None:
    if not bench.CORPUS.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing under CI: {bench.CORPUS}")
        pytest.skip(f"the shared corpus is not here ({bench.CORPUS}); it lives beside the project")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    altered = re.search(r"altered by redact: +(\d+) ", out)
    alone = re.search(r"altered by the names alone: +(\d+) ", out)
    twins = re.search(r"twins of a true positive: +(\d+) ", out)
    carriers = re.search(r"carriers of a positive's secret: +(\d+) ", out)
    floor = re.search(r"floor \(any of the three\): +(\d+) .*target: at most (\d+);", out)
    assert altered and alone and twins and carriers and floor, out
    assert 0 < int(twins.group(1)) <= int(altered.group(1))
    assert 0 < int(alone.group(1)) <= int(altered.group(1))
    # the floor is a union: at least its largest part, at most their sum, never more than
    # what redact alters (each part is something redact alters)
    parts = [int(m.group(1)) for m in (alone, twins, carriers)]
    assert max(parts) <= int(floor.group(1)) <= min(sum(parts), int(altered.group(1)))
    assert int(floor.group(2)) == int(0.15 * len(bench.load_corpus(bench.CORPUS, 1).negatives))
    # one listed line per altered negative, by id
    assert len(re.findall(r"^s\d{4} ", out, flags=re.MULTILINE)) == int(altered.group(1))
