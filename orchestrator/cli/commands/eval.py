"""``orchestrator eval [DIR] [--json] [--report PATH] [--pad [--pad-bytes N] [--seed N]]
[--live --max-cost-usd X]``: how well the deterministic layers (and, with ``--live``, the
configured model) decide, over a labelled corpus of failures.

Offline (the default) nothing is called and nothing costs: the corpus goes through the
classifier, the recovery precheck with its playbook, and the bundle builder. The config,
when there is one, gives the bundle's caps; without one the defaults apply.

The corpus is this project's own (``bash scripts/dev.sh corpus DIR``) or the ci-logs
corpus of real CI logs (``../shared/data/ci-logs``). ``--pad`` evaluates every case again
with its log buried in ordinary build output (written to a temporary directory, never
into the corpus); a ci-logs corpus, or a padded run, also gets the scorecard: by tool
family and by class, found and padded side by side, the goals of issue 25 and every miss.

Every eval is also measured as learning (``eval.learning``, issue 44): the first pass's
proven decisions are promoted into a temporary playbook and every failure is decided
again, its model calls counted (with ``--pad``: padded too, and the padded logs against
what was learned as found). It is always on: it reads no log again (each failure's
signature is made in the first pass) and costs well under a second, and the goal it
measures (no second call for a failure decided right once) is one of the eval's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from orchestrator import storage
from orchestrator.domain.errors import OrchestratorError, UsageError
from orchestrator.eval.padding import PAD_BYTES, PAD_SEED

if TYPE_CHECKING:
    from orchestrator.domain.config import Config
    from orchestrator.eval.live import LiveSummary
    from orchestrator.eval.scorecard import Scorecard
    from orchestrator.recovery.gateway import ModelGateway

# The arguments are declared while every command's parser is built: what evaluating
# needs (pydantic models, the layers) is imported only when ``run_eval`` runs.
GatewayBuilder = Callable[["Config", Mapping[str, str]], "ModelGateway | None"]
DEFAULT_CORPUS = "eval-corpus"
MAX_PAD_BYTES = 64 * 1024 * 1024


def add_arguments(evaluate_parser: argparse.ArgumentParser) -> None:
    """The ``eval`` subcommand's arguments (``cli.main`` builds the subparser)."""
    evaluate_parser.add_argument(
        "corpus_dir", nargs="?", metavar="DIR",
        help=f"the corpus directory (default: ./{DEFAULT_CORPUS}); also --corpus DIR",
    )  # fmt: skip
    evaluate_parser.add_argument(
        "--corpus", metavar="DIR",
        help="the corpus directory (build one with `bash scripts/dev.sh corpus DIR`, or "
        "name ../shared/data/ci-logs)",
    )  # fmt: skip
    evaluate_parser.add_argument("--json", action="store_true", help="print the results as JSON")
    evaluate_parser.add_argument(
        "--report", metavar="PATH", help="also write the JSON results here"
    )
    evaluate_parser.add_argument(
        "--pad", action="store_true",
        help="also evaluate every case with ordinary build output before and after its log",
    )  # fmt: skip
    evaluate_parser.add_argument(
        "--pad-bytes", metavar="N", type=int,
        help=f"with --pad: bytes of padding on each side (default {PAD_BYTES})",
    )  # fmt: skip
    evaluate_parser.add_argument(
        "--seed", metavar="N", type=int,
        help=f"with --pad: the padding's seed (default {PAD_SEED})",
    )  # fmt: skip
    evaluate_parser.add_argument(
        "--live", action="store_true",
        help="also ask the configured model about the cases that reach it (costs money)",
    )  # fmt: skip
    evaluate_parser.add_argument(
        "--max-cost-usd", metavar="X", type=float,
        help="with --live: stop before the diagnosis that could take the spend past X dollars",
    )  # fmt: skip


def run(
    args: argparse.Namespace, config_file: Path, out: TextIO, environ: Mapping[str, str]
) -> int:
    """``orchestrator eval`` from parsed arguments (those ``add_arguments`` declares)."""
    if args.corpus_dir and args.corpus and Path(args.corpus_dir) != Path(args.corpus):
        raise UsageError("eval: name the corpus once (DIR or --corpus DIR)")
    if not args.pad and (args.pad_bytes is not None or args.seed is not None):
        raise UsageError("--pad-bytes and --seed apply to eval --pad only")
    pad_bytes = PAD_BYTES if args.pad_bytes is None else args.pad_bytes
    if not 0 < pad_bytes <= MAX_PAD_BYTES:
        raise UsageError(f"--pad-bytes: between 1 and {MAX_PAD_BYTES} bytes")
    return run_eval(
        Path(args.corpus_dir or args.corpus or DEFAULT_CORPUS), config_file, out,
        as_json_output=args.json, report_path=Path(args.report) if args.report else None,
        pad=args.pad, pad_bytes=pad_bytes, seed=PAD_SEED if args.seed is None else args.seed,
        live=args.live, max_cost_usd=args.max_cost_usd, environ=environ,
    )  # fmt: skip


def _configured_gateway(config: Config, environ: Mapping[str, str]) -> ModelGateway | None:
    # Imported only on the live path: the SDK costs most of a second to import.
    from orchestrator.recovery.anthropic_gateway import gateway_from_config

    return gateway_from_config(config.model, environ)


def _config(config_file: Path, *, required: bool) -> Config | None:
    from orchestrator.domain.config import load_config

    if not config_file.is_file():
        if required:
            raise UsageError(f"eval --live: no config at {config_file} (it names the model)")
        return None
    return load_config(config_file).config


def run_eval(
    corpus_dir: Path,
    config_file: Path,
    out: TextIO,
    *,
    as_json_output: bool = False,
    report_path: Path | None = None,
    pad: bool = False,
    pad_bytes: int = PAD_BYTES,
    seed: int = PAD_SEED,
    live: bool = False,
    max_cost_usd: float | None = None,
    environ: Mapping[str, str],
    build_gateway: GatewayBuilder = _configured_gateway,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    if live and (max_cost_usd is None or max_cost_usd <= 0):
        raise UsageError("eval --live needs --max-cost-usd X (a positive amount in US dollars)")
    if not live and max_cost_usd is not None:
        raise UsageError("--max-cost-usd applies to eval --live only")
    from orchestrator.domain.config import ContextLimits
    from orchestrator.eval.corpus import load_corpus
    from orchestrator.eval.learning import measure, verdicts_of
    from orchestrator.eval.live import LiveSettings, run_live
    from orchestrator.eval.offline import evaluate, evaluate_padded, summarise
    from orchestrator.eval.report import as_json, render_learning, render_scorecard, render_table
    from orchestrator.eval.scorecard import scorecard

    cases = load_corpus(corpus_dir)
    config = _config(config_file, required=live)
    limits = config.recovery.context if config is not None else ContextLimits()
    found, _ = evaluate(cases, corpus_dir, limits)
    padded = (
        evaluate_padded(cases, corpus_dir, limits, pad_bytes=pad_bytes, seed=seed) if pad else ()
    )
    results = found + padded
    summary = summarise(results)
    card: Scorecard | None = None
    if pad or any(case.label.family for case in cases):
        card = scorecard(found, padded if pad else None)
    live_summary: LiveSummary | None = None
    if live:
        assert config is not None and max_cost_usd is not None
        gateway = build_gateway(config, environ)
        if gateway is None:
            raise UsageError(
                f"eval --live: no model key (set {config.model.api_key_env} in the environment)"
            )
        # The padded twins are the same failures: the model is asked about each once.
        live_summary = run_live(
            cases, found, gateway=gateway, prices=config.prices,
            settings=LiveSettings(
                max_cost_usd=max_cost_usd, max_tokens=config.model.max_tokens,
                max_reasks=config.recovery.max_reasks,
            ),
            clock=clock,
        )  # fmt: skip
    learning = measure(
        cases, found, padded,
        live=verdicts_of(live_summary) if live_summary is not None else None,
    )  # fmt: skip
    document = as_json(summary, results, live_summary, card, learning)
    if report_path is not None:
        # A report the user named, not state: a plain write, its failure a usage error.
        try:
            report_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the report {report_path}: {exc.strerror}") from exc
    if as_json_output:
        out.write(json.dumps(document) + "\n")
    else:
        out.write(render_table(summary, live_summary, with_misses=card is None))
        if card is not None:
            out.write("\n" + render_scorecard(card))
        out.write("\n" + render_learning(learning))
        if report_path is not None:
            out.write(f"report written to {report_path}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m orchestrator.cli.commands.eval [DIR] [--pad ...]``: this command with
    every argument ``add_arguments`` declares, for as long as ``cli.main`` still declares
    only the older ones (``--corpus``, ``--json``, ``--report``, ``--live``)."""
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.cli.commands.eval", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config", metavar="PATH", help="config.toml (for the bundle's caps)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args, storage.config_path(args.config, os.environ), sys.stdout, os.environ)
    except OrchestratorError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
