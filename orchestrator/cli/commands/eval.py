"""``orchestrator eval [--corpus DIR] [--json] [--report PATH] [--live --max-cost-usd X]``:
how well the deterministic layers (and, with ``--live``, the configured model) decide,
over a labelled corpus of failures.

Offline (the default) nothing is called and nothing costs: the corpus goes through the
classifier, the recovery precheck with its playbook, and the bundle builder. The config,
when there is one, gives the bundle's caps; without one the defaults apply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.domain.config import Config, ContextLimits, load_config
from orchestrator.domain.errors import UsageError
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.live import LiveSettings, LiveSummary, run_live
from orchestrator.eval.offline import evaluate
from orchestrator.eval.report import as_json, render_table
from orchestrator.recovery.gateway import ModelGateway

GatewayBuilder = Callable[[Config, Mapping[str, str]], ModelGateway | None]


def _configured_gateway(config: Config, environ: Mapping[str, str]) -> ModelGateway | None:
    # Imported only on the live path: the SDK costs most of a second to import.
    from orchestrator.recovery.anthropic_gateway import gateway_from_config

    return gateway_from_config(config.model, environ)


def _config(config_file: Path, *, required: bool) -> Config | None:
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
    cases = load_corpus(corpus_dir)
    config = _config(config_file, required=live)
    limits = config.recovery.context if config is not None else ContextLimits()
    results, summary = evaluate(cases, corpus_dir, limits)
    live_summary: LiveSummary | None = None
    if live:
        assert config is not None and max_cost_usd is not None
        gateway = build_gateway(config, environ)
        if gateway is None:
            raise UsageError(
                f"eval --live: no model key (set {config.model.api_key_env} in the environment)"
            )
        live_summary = run_live(
            cases, results, gateway=gateway, prices=config.prices,
            settings=LiveSettings(
                max_cost_usd=max_cost_usd, max_tokens=config.model.max_tokens,
                max_reasks=config.recovery.max_reasks,
            ),
            clock=clock,
        )  # fmt: skip
    document = as_json(summary, results, live_summary)
    if report_path is not None:
        # A report the user named, not state: a plain write, its failure a usage error.
        try:
            report_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the report {report_path}: {exc.strerror}") from exc
    if as_json_output:
        out.write(json.dumps(document) + "\n")
    else:
        out.write(render_table(summary, live_summary))
        if report_path is not None:
            out.write(f"report written to {report_path}\n")
    return 0
