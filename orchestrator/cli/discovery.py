"""Which config file a command uses when none is named, found the way git finds its
repository: ``config.toml`` in the working directory, then in each parent up to ``/``,
then the user's ``$XDG_CONFIG_HOME/orchestrator/config.toml`` (``~/.config`` when unset).

``--config`` and ``$ORCHESTRATOR_CONFIG`` still win outright. A pure function of the
working directory, the environment and an ``exists`` test, so every rule is testable
without building directories.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

CONFIG_NAME = "config.toml"


def user_config(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/orchestrator/config.toml``; a relative XDG_CONFIG_HOME is
    ignored, as the XDG spec asks. None when neither it nor $HOME is set."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "orchestrator" / CONFIG_NAME
    home = environ.get("HOME", "")
    if not home:
        return None
    return Path(home) / ".config" / "orchestrator" / CONFIG_NAME


def candidates(cwd: Path, environ: Mapping[str, str]) -> list[Path]:
    """Every place looked in, in order (``cwd`` must be absolute)."""
    found = [directory / CONFIG_NAME for directory in (cwd, *cwd.parents)]
    user = user_config(environ)
    if user is not None:
        found.append(user)
    return found


def discover_config(
    cwd: Path, environ: Mapping[str, str], exists: Callable[[Path], bool]
) -> Path | None:
    """The first of ``candidates`` that exists, or None."""
    return next((path for path in candidates(cwd, environ) if exists(path)), None)
