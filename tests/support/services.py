"""The one place the tests build ``Services``: the real composition, with what a test
swaps passed as keywords (the environment, the executor, the gateway, the clock, the
sleep). The state dir's own files are the storage, as in a local run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, TextIO

from orchestrator.app.services import Services
from orchestrator.cli.console import PlainReporter
from orchestrator.domain.config import LoadedConfig
from orchestrator.reports.handoff import MARKDOWN
from orchestrator.storage.files import FileStorage


def make_services(
    loaded: LoadedConfig, state_dir: Path, *, out: TextIO | None = None, **swapped: Any
) -> Services:
    """Services over ``state_dir`` with ``loaded``'s config, reporting plainly to ``out``
    (a throwaway buffer by default)."""
    return Services(
        loaded=loaded,
        storage=FileStorage(state_dir),
        reporter=PlainReporter(out if out is not None else io.StringIO()),
        handoffs=MARKDOWN,
        **swapped,
    )
