"""``orchestrator demo [--dir DIR] [--with-model]``: build the demo project and run its
tickets through the default pipeline (see ``orchestrator.demo.run``).

The demo package is imported only here, and only when this command is chosen: nothing
the pipeline imports depends on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def demo(workdir: str | None, *, with_model: bool, cli: Callable[[list[str]], int]) -> int:
    """``workdir`` None: the demo's default directory under the current one; ``cli`` the
    orchestrator's entry point, which the demo drives for each of its tickets."""
    from orchestrator.demo.run import DEFAULT_DIR, run_demo

    return run_demo(Path(workdir or DEFAULT_DIR), with_model=with_model, cli=cli)
