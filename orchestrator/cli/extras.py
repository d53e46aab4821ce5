"""The optional extras a command may need, and the one-line refusal when one is missing."""

from __future__ import annotations

from orchestrator.domain.errors import UsageError

DISTRIBUTED_INSTALL = (
    "pipx install 'ticket-orchestrator[distributed]' "
    "(or pip install 'ticket-orchestrator[distributed]')"
)


def require_distributed(what: str) -> None:
    """Refuse (exit 2, one line) a command that needs the ``distributed`` extra when its
    libraries cannot be imported, rather than failing later as an internal error."""
    import importlib

    for module in ("celery", "redis", "cryptography"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise UsageError(
                f"{what} needs the distributed extra ({module} is not installed): "
                f"{DISTRIBUTED_INSTALL}"
            ) from None
