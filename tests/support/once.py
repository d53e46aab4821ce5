"""Work done once per test run, however many pytest-xdist workers ask for it.

A module- or session-scoped fixture is set up once per *worker*: under ``--dist
worksteal`` the tests of one module land on several workers, and each would build the
same expensive thing again (a 30 s evaluation over the real CI logs, the demo's runs).
These helpers keep the result in the run's temp root, shared by its workers: the first
worker to ask builds it under a lock, the others wait on the lock and read it. A build
killed half-way leaves no result behind (it is written or marked last), so it is built
again, never half-read.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["built_once", "computed_once", "shared_temp_root"]

_DONE = "done"  # marks a directory whose build finished


def shared_temp_root(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """The run's temp root, the same for every xdist worker of the run (each worker's own
    basetemp is a folder under it); without workers, the session's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def _place(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config, name: str) -> Path:
    place = shared_temp_root(tmp_path_factory, config) / "once" / name
    place.mkdir(parents=True, exist_ok=True)
    return place


def built_once(
    tmp_path_factory: pytest.TempPathFactory,
    config: pytest.Config,
    name: str,
    build: Callable[[Path], None],
) -> Path:
    """A directory ``build`` filled once per run; the tests that share it must not change
    it (copy it first)."""
    place = _place(tmp_path_factory, config, name)
    where = place / "built"
    with open(place / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (place / _DONE).exists():
            shutil.rmtree(where, ignore_errors=True)  # what a killed build left
            build(where)
            (place / _DONE).write_text("")
    return where


def computed_once(
    tmp_path_factory: pytest.TempPathFactory,
    config: pytest.Config,
    name: str,
    compute: Callable[[], str],
) -> str:
    """The text ``compute`` returns, computed once per run (a model's JSON, say)."""
    place = _place(tmp_path_factory, config, name)
    result = place / "result"
    with open(place / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            text = compute()
            partial = place / "result.partial"
            partial.write_text(text, encoding="utf-8")
            partial.replace(result)
    return result.read_text(encoding="utf-8")
