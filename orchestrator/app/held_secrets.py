"""The secrets a process holds, gathered from its environment and its config file
(``domain/held_secrets.py`` says which), handed to the redaction registry
(``redaction/held.py``), which ``redact`` reads everywhere text leaves the process.

Gathered twice: where the CLI starts, before any command reads a config (so whatever a
command prints or keeps, ``show`` and ``report`` included, is redacted by value), and
where a run's services are built (``services.build_services``: the fleet's Celery worker
and every in-process caller build them there, from the environment they were handed).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from orchestrator.domain.held_secrets import held_values
from orchestrator.redaction import HeldSecrets, hold, holding


def config_table(config_file: Path) -> Mapping[str, object] | None:
    """The config's TOML as written, or None when it cannot be read (the command that
    loads it reports why)."""
    try:
        return tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def hold_secrets(config_file: Path, environ: Mapping[str, str]) -> None:
    """Hold, from now on, what ``environ`` and the config hold."""
    hold(held_values(environ, config_table(config_file)))


@contextmanager
def holding_secrets(config_file: Path, environ: Mapping[str, str]) -> Iterator[HeldSecrets]:
    """Hold what ``environ`` and the config hold for the block (one command)."""
    with holding(held_values(environ, config_table(config_file))) as held:
        yield held
