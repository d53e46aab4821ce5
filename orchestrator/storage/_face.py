"""A package's face, imported name by name (PEP 562): ``from orchestrator.storage import
RunStore`` loads the runs module when asked, not every store when the package loads."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``where`` comes from the
    submodule it maps to, imported on first use and then kept in the package."""

    def __getattr__(name: str) -> Any:
        try:
            module = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next look-up is a plain one
        return value

    return __getattr__
