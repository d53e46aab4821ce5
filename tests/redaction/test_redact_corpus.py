"""Redaction measured against other scanners' test data (``shared/data/secret-samples.json``:
true positives and negatives from the gitleaks, detect-secrets and trufflehog suites).

Three ways a secret reaches us, each measured on every true positive:

* as written: the sample text itself;
* on a diff's added lines: every line of the text prefixed with ``+``;
* in a log line with no telling name: ``2026-01-01 12:00:00 INFO got <secret> from
  upstream``, once for each of the sample's secret substrings.

A positive counts when every one of its secret substrings is gone from the output; a
negative counts as altered when the output differs from the input at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator.redaction import redact

ROOT = Path(__file__).resolve().parents[2]
# Beside the project (CI, the main checkout); a git worktree sits one level deeper.
_PLACES = [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
CORPUS = next(
    (p / "data" / "secret-samples.json" for p in _PLACES if (p / "data").is_dir()),
    _PLACES[0] / "data" / "secret-samples.json",
)

# Where the hand-written rules stand (just under what they reach, so a regression fails);
# the targets are printed beside them. The negatives have a ceiling and no target: they
# are other scanners' "this rule must not fire here", and most of those still altered are
# keys in real form (a vendor's format one character off, a known public key, a
# half-edited key, a password a scanner skips for its file type), which redaction removes
# on purpose — see "Recall before over-redaction" in orchestrator/redaction/vendors.py. (The
# old target of 15 % is retired, issue 25: the rule on secret names alone alters about
# 20 % of them. What redaction takes from text that holds no secret is measured on real
# CI logs: tests/redaction/test_redaction_real_logs.py.)
FLOORS = {"as written": 0.98, "diff lines": 0.98, "log line": 0.60}
CEILING_NEGATIVES_ALTERED = 0.365
TARGETS = {"as written": 0.95, "diff lines": 0.95, "log line": 0.55}


def _samples() -> list[dict[str, Any]]:
    if not CORPUS.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing under CI: {CORPUS}")
        pytest.skip(f"the shared corpus is not here ({CORPUS}); it lives beside the project")
    samples: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))["samples"]
    return samples


def as_diff(text: str) -> str:
    return "\n".join("+" + line for line in text.split("\n"))


def in_log_line(secret: str) -> str:
    return f"2026-01-01 12:00:00 INFO got {secret} from upstream"


def _gone(output: str, secrets: list[str]) -> bool:
    return all(secret not in output for secret in secrets)


def test_recall_and_over_redaction_on_the_shared_corpus() -> None:
    samples = _samples()
    positives = [s for s in samples if s["expected"]]
    negatives = [s for s in samples if not s["expected"]]
    assert len(positives) >= 1000 and len(negatives) >= 500  # the whole corpus was read

    rates = {
        "as written": sum(_gone(redact(s["text"]), s["secrets"]) for s in positives),
        "diff lines": sum(_gone(redact(as_diff(s["text"])), s["secrets"]) for s in positives),
        "log line": sum(
            all(_gone(redact(in_log_line(x)), [x]) for x in s["secrets"]) for s in positives
        ),
    }
    recall = {k: v / len(positives) for k, v in rates.items()}
    altered = sum(redact(s["text"]) != s["text"] for s in negatives) / len(negatives)
    for name, value in recall.items():
        print(f"{name:18} {value:6.1%} removed   (target >= {TARGETS[name]:.0%})")
    print(
        f"{'negatives altered':18} {altered:6.1%}           (ceiling {CEILING_NEGATIVES_ALTERED:.1%})"
    )

    for name, floor in FLOORS.items():
        assert recall[name] >= floor, (name, recall[name])
    assert altered <= CEILING_NEGATIVES_ALTERED


def test_the_redacted_corpus_is_stable() -> None:
    # Redacting twice changes nothing: what the first pass left is not a secret it knows.
    for sample in _samples()[::7]:
        once = redact(sample["text"])
        assert redact(once) == once, sample["id"]
