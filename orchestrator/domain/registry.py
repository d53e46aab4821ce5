"""Things kept by name, in the order they were registered: the vocabulary's action words
(``vocabulary.py``) are one; each action's code, in the actions layer above, is another,
keyed by the same names."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Entries by name, in the order registered; a name is registered once."""

    def __init__(self, entries: Iterable[T]) -> None:
        self._entries: dict[str, T] = {}
        for entry in entries:
            self.register(entry)

    def check(self, entry: T) -> None:
        """Refuse an entry that may not be registered (ValueError); a subclass adds rules."""

    def register(self, entry: T) -> None:
        if entry.name in self._entries:
            raise ValueError(f"action {entry.name!r} is already registered")
        self.check(entry)
        self._entries[entry.name] = entry

    def unregister(self, name: str) -> None:
        del self._entries[name]

    @contextmanager
    def registered(self, entry: T) -> Iterator[T]:
        """``entry`` registered for the duration of the block (an extension, a test)."""
        self.register(entry)
        try:
            yield entry
        finally:
            self.unregister(entry.name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"{name!r} is not one of: {', '.join(self._entries)}") from None

    def entries(self) -> tuple[T, ...]:
        return tuple(self._entries.values())
