"""One walk over a JSON-like value that rewrites its strings: used to scrub what a model
said and to make what is persisted valid UTF-8. It keeps its own stack, so no value is
too deep for it (a hostile reply may nest thousands of levels)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rewrite = Callable[[str], tuple[str, int]]


def valid_text(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many were: what is
    stored is always valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        chars = ["\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text]
        return "".join(chars), sum(1 for a, b in zip(chars, text, strict=True) if a != b)
    return text, 0


def map_strings(value: Any, rewrite: Rewrite, *, keys: bool = False) -> tuple[Any, int]:
    """A copy of ``value`` with every string (and, with ``keys``, every dict key) passed
    through ``rewrite``, and the sum of the counts it returned. What is not a string, a
    list or a dict is kept as it is."""
    if isinstance(value, str):
        return rewrite(value)
    if not isinstance(value, list | dict):
        return value, 0
    count = 0
    root: list[Any] | dict[Any, Any] = [] if isinstance(value, list) else {}
    stack: list[tuple[Any, list[Any] | dict[Any, Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, member in items:
            kept: Any = member
            if isinstance(member, str):
                kept, n = rewrite(member)
                count += n
            elif isinstance(member, list | dict):
                kept = [] if isinstance(member, list) else {}
                stack.append((member, kept))
            if isinstance(target, dict):
                name = key
                if keys:
                    name, n = rewrite(str(key))
                    count += n
                target[name] = kept
            else:
                target.append(kept)
    return root, count
