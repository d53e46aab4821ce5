"""A package's face, imported name by name (PEP 562): ``from orchestrator.storage import
FileStorage`` loads the files module when asked, not every store when the package loads.

The face's one list of names is its ``if TYPE_CHECKING:`` block of imports: the type
checker reads it as written (a name not in it is an error, never ``Any``), and the
package's ``__getattr__`` reads the same lines when a name is first asked for."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def faced_names(source: str) -> dict[str, str]:
    """name → module of each ``from module import name`` in ``source``'s top-level
    ``if TYPE_CHECKING:`` block."""
    import ast

    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for each in node.body:
                if isinstance(each, ast.ImportFrom) and each.module:
                    names.update((a.asname or a.name, each.module) for a in each.names)
    return names


def lazy_getattr(package: str, init_file: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` (whose ``__init__`` is ``init_file``):
    each faced name comes from its module, imported on first use, then kept there."""
    where: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not where:
            where.update(faced_names(Path(init_file).read_text(encoding="utf-8")))
        try:
            module = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next look-up is a plain one
        return value

    return __getattr__
