"""Find config.toml and the state dir without importing pydantic: the one resolver every
command uses.

Read-only commands (`runs`, `--help`) must start in a few tens of milliseconds, and
importing pydantic alone costs ~100 ms; they only need ``state_dir``, which this module
reads with tomllib. Every command that acts validates the whole file with ``config.py``
and resolves the state dir through :func:`resolve_state_dir` all the same, so that
``--state-dir '~/s'`` names one directory whichever command is given it.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.domain.errors import ConfigError

CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DEFAULT_STATE_DIR = ".state"


def config_path(cli_value: str | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    """--config, else $ORCHESTRATOR_CONFIG, else ./config.toml."""
    raw = cli_value or environ.get(CONFIG_ENV) or "config.toml"
    return Path(raw).expanduser().resolve()


def resolve_state_dir(config_dir: Path, configured: str, cli_value: str | None) -> Path:
    """The state dir: ``--state-dir`` (relative to the current directory, as a shell user
    expects of a path they typed), else the config's ``state_dir`` (relative to the
    config's directory, so the config means the same thing wherever it is run from).
    ``~`` is expanded in both."""
    if cli_value:
        return Path(cli_value).expanduser().resolve()
    return (config_dir / Path(configured).expanduser()).resolve()


def state_dir(config_file: Path, cli_value: str | None) -> Path:
    """The state dir for a command that does not load the whole config."""
    if cli_value:
        return resolve_state_dir(config_file.parent, DEFAULT_STATE_DIR, cli_value)
    import tomllib  # only when the config must be read: ~6 ms of start-up otherwise

    try:
        with config_file.open("rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"config error: {config_file}: no such file (pass --config or --state-dir)"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config error: {config_file}: {exc}") from None
    value = raw.get("state_dir", DEFAULT_STATE_DIR)
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"config error: {config_file}: state_dir: expected a non-empty string (got {value!r})"
        )
    return resolve_state_dir(config_file.parent, value, None)


def state_dir_problem(state_dir: Path) -> str | None:
    """Why runs could not be recorded under ``state_dir`` (None: they could), for the
    preflight. An existing directory is proven by writing and removing one temp file (named
    as an atomic write's, so one a kill left behind is swept); a missing one must be
    creatable, judged from its nearest existing parent, and nothing is created."""
    import tempfile

    from orchestrator.storage._atomic import writer_tag

    existing = state_dir
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot be created: {existing} is not a directory"
    if existing != state_dir:
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"cannot be created: {existing} is not writable"
        return None
    try:
        fd, probe = tempfile.mkstemp(dir=state_dir, prefix=f".preflight.{writer_tag()}.",
                                     suffix=".tmp")  # fmt: skip
    except OSError as exc:
        return f"cannot be written: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None
