"""Find config.toml and the state dir without importing pydantic.

Read-only commands (`runs`, `--help`) must start in a few tens of milliseconds, and
importing pydantic alone costs ~100 ms; they only need ``state_dir``, which this module
reads with tomllib. Every command that acts validates the whole file with ``config.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.domain.errors import ConfigError

CONFIG_ENV = "ORCHESTRATOR_CONFIG"
_DEFAULT_STATE_DIR = ".state"


def config_path(cli_value: str | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    """--config, else $ORCHESTRATOR_CONFIG, else ./config.toml."""
    raw = cli_value or environ.get(CONFIG_ENV) or "config.toml"
    return Path(raw).expanduser().resolve()


def state_dir(config_file: Path, cli_value: str | None) -> Path:
    """--state-dir, else config's ``state_dir`` (relative to the config file), else .state."""
    if cli_value:
        return Path(cli_value).expanduser().resolve()
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
    value = raw.get("state_dir", _DEFAULT_STATE_DIR)
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"config error: {config_file}: state_dir: expected a non-empty string (got {value!r})"
        )
    return (config_file.parent / value).resolve()
