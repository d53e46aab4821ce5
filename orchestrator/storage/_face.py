"""A package's face, imported name by name (PEP 562): ``from orchestrator.storage import
FileStorage`` loads the files module when asked, not every store when the package loads.

The face's one list of names is its ``if TYPE_CHECKING:`` block of imports: the type
checker reads it as written (a name not in it is an error, never ``Any``), and the
package's ``__getattr__`` reads the same lines when a name is first asked for."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One faced name per line, as the faces are written; a test reads each face with ``ast``
# too and fails if the two readings differ. A pattern, not ``ast``: the face is read in
# every process that asks it for a name, and ``ast`` costs that process 3-5 ms to import.
_FACED = re.compile(r"^    from ([\w.]+) import (\w+)(?: as (\w+))?$", re.MULTILINE)


def faced_names(source: str) -> dict[str, str]:
    """name → module of each ``from module import name`` in ``source``'s top-level
    ``if TYPE_CHECKING:`` block."""
    block = source.partition("\nif TYPE_CHECKING:\n")[2].partition("\nelse:\n")[0]
    return {alias or name: module for module, name, alias in _FACED.findall(block)}


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
