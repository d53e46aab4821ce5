"""``orchestrator run TICKET``: drive one ticket to a terminal state (or resume it)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.app.driver import Services, run_ticket
from orchestrator.domain import errors
from orchestrator.domain.config import LoadedConfig, ModelConfig, load_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ModelGateway
from orchestrator.reports.display import reporter_for
from orchestrator.storage.baselines import BaselineStore
from orchestrator.storage.files import FileStorage
from orchestrator.storage.locate import resolve_state_dir

EXIT_FOR_STATE: Mapping[RunState, int] = {
    RunState.COMPLETED: errors.EXIT_COMPLETED,
    RunState.NEEDS_HUMAN: errors.EXIT_NEEDS_HUMAN,
    RunState.FAILED: errors.EXIT_FAILED,
    RunState.SPLIT: errors.EXIT_SPLIT,
    RunState.AWAITING_APPROVAL: errors.EXIT_AWAITING_APPROVAL,
}


def model_gateway_factory(
    model: ModelConfig, environ: Mapping[str, str]
) -> Callable[[], ModelGateway | None]:
    """Build the configured gateway only when a model must actually be asked."""

    def build() -> ModelGateway | None:
        from orchestrator.recovery.anthropic_gateway import gateway_from_config

        return gateway_from_config(model, environ)

    return build


def build_services(
    loaded: LoadedConfig, state_dir_override: str | None, out: TextIO, environ: Mapping[str, str]
) -> Services:
    """The real services: the runner, the configured model, this terminal."""
    state_dir = resolve_state_dir(loaded.root, loaded.config.state_dir, state_dir_override)
    storage = FileStorage(state_dir)
    storage.sweep_stale_temps()  # what killed writes left behind
    return Services(
        loaded=loaded,
        store=storage.runs,
        reporter=reporter_for(out, environ),
        environ=dict(environ),
        gateway_factory=model_gateway_factory(loaded.config.model, environ),
        record_green=BaselineStore(state_dir).record_green,
    )


def exit_code(record: RunRecord) -> int:
    return EXIT_FOR_STATE.get(record.state, errors.EXIT_BUG)


def run(
    config_file: Path,
    state_dir_override: str | None,
    ticket_file: str,
    *,
    rerun: bool,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
) -> int:
    loaded = load_config(config_file)
    # The ticket is validated before anything is created under the state dir.
    ticket = load_ticket(Path(ticket_file))
    services = build_services(loaded, state_dir_override, out, environ)
    return exit_code(run_ticket(ticket, services, rerun=rerun))
