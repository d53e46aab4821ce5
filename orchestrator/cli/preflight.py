"""The preflight before a run's first stage (``gate``): ``run``, ``resume``, ``batch``
(once, before any ticket) and ``batch --backend celery`` (once, before anything is
queued) call it; ``doctor`` prints the same checklist (``checks``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

from orchestrator.domain.errors import EXIT_USAGE, OrchestratorError

if TYPE_CHECKING:
    from orchestrator.app.preflight import Backend
    from orchestrator.domain.config import LoadedConfig
    from orchestrator.domain.preflight import Check


class PreflightFailed(OrchestratorError):
    """A run cannot succeed here: the failing checks, each with its fix."""

    exit_code = EXIT_USAGE

    def __init__(self, failures: list[Check]) -> None:
        from orchestrator.domain.preflight import line

        super().__init__(
            "preflight: a run cannot succeed here, so nothing was started:\n"
            + "".join(f"  {line(check)}\n" for check in failures)
            + "(`orchestrator doctor` lists every check; --no-preflight skips them)"
        )
        self.failures = failures


def checks(
    loaded: LoadedConfig,
    state_dir_override: str | None,
    environ: Mapping[str, str],
    backend: Backend,
) -> tuple[Check, ...]:
    from orchestrator.app.preflight import gather
    from orchestrator.domain.preflight import checklist
    from orchestrator.storage import resolve_state_dir

    state_dir = resolve_state_dir(loaded.root, loaded.config.state_dir, state_dir_override)
    return checklist(gather(loaded, state_dir, environ, backend=backend))


def gate(
    loaded: LoadedConfig,
    state_dir_override: str | None,
    environ: Mapping[str, str],
    err: TextIO,
    *,
    backend: Backend = "local",
    warn: bool = True,
) -> None:
    """Before a run's first stage: raise ``PreflightFailed`` (exit 2) when a run cannot
    succeed; print each warning on ``err``, once (unless not ``warn``)."""
    from orchestrator.domain.preflight import failed, line, warned

    found = checks(loaded, state_dir_override, environ, backend)
    failures = failed(found)
    if failures:
        raise PreflightFailed(failures)
    for check in warned(found) if warn else ():
        print(f"preflight: {line(check)}", file=err, flush=True)
