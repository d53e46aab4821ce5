"""Prompt size and root-cause recall over the labelled failure corpus.

    python bench/bench_eval.py [--quick] [--corpus DIR]

Builds the corpus (real tools on tiny projects, ~20 s; or reads ``--corpus DIR``), runs
the offline evaluation, and measures the whole prompt the model would get for each case
(the prompt text around the bundle, in tokens estimated as bytes/4). Baseline, same run:
the unpadded cases; the padded twins (2 MiB of ordinary output around the failure) should
cost no more. Targets: median prompt ≤ 3,000 tokens, root-cause recall 100 % (padded
included). Exit 0 unless the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MEDIAN_TOKENS = 3000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="accepted; the corpus is the same")
    parser.add_argument("--corpus", type=Path, help="an existing corpus (default: build one)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from orchestrator.domain.config import ContextLimits
    from orchestrator.domain.proposals import facts_for
    from orchestrator.eval import layers
    from orchestrator.eval.corpus import load_corpus
    from orchestrator.eval.offline import BYTES_PER_TOKEN, evaluate
    from orchestrator.recovery.prompt import build_prompt

    from corpus.build import build

    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        corpus_dir = args.corpus
        if corpus_dir is None:
            corpus_dir = Path(tmp) / "corpus"
            started = time.perf_counter()
            for line in build(corpus_dir):
                print(line)
            print(f"corpus built in {time.perf_counter() - started:.1f} s")
        cases = load_corpus(corpus_dir)
        started = time.perf_counter()
        results, summary = evaluate(cases, corpus_dir, ContextLimits())
        elapsed = time.perf_counter() - started
    labels = {case.label.id: case.label for case in cases}
    tokens: dict[bool, list[int]] = {False: [], True: []}
    for result in results:
        ctx = layers.decision_context(labels[result.id])
        prompt = build_prompt(facts_for(ctx, "CORPUS-1", "bug-fix"), result.bundle_text)
        tokens[result.padded].append(len(prompt.encode()) // BYTES_PER_TOKEN)
    plain = statistics.median(tokens[False])
    padded = statistics.median(tokens[True]) if tokens[True] else plain
    median_all = statistics.median(tokens[False] + tokens[True])
    p95 = {k: _p95(v) for k, v in tokens.items() if v}
    recall = summary.root_cause_recall or 0.0
    print(f"offline eval of {summary.cases} cases in {elapsed:.2f} s")
    print(f"  prompt tokens median (all)       {median_all:.0f}")
    print(f"  prompt tokens median (unpadded)  {plain:.0f}   (baseline)")
    print(f"  prompt tokens median (padded)    {padded:.0f}   ratio {padded / plain:.2f}")
    print(
        f"  prompt tokens p95 (unpadded / padded / all)  {p95.get(False, 0)} / "
        f"{p95.get(True, 0)} / {_p95(tokens[False] + tokens[True])}"
    )
    print(f"  root-cause recall                {recall * 100:.1f} %"
          f" (padded {100 * (summary.root_cause_recall_padded or 0):.1f} %)")  # fmt: skip
    print("summary")
    checks = (
        (f"median prompt ≤ {TARGET_MEDIAN_TOKENS} tokens", median_all <= TARGET_MEDIAN_TOKENS),
        ("root-cause recall 100 %", recall == 1.0),
    )
    for name, ok in checks:
        print(f"  {name:<36} {'PASS' if ok else 'FAIL'}")
    print(f"  {sum(ok for _, ok in checks)}/{len(checks)} targets met")
    return 0


def _p95(values: list[int]) -> int:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


if __name__ == "__main__":
    raise SystemExit(main())
