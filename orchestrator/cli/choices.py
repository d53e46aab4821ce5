"""The CLI's choices for the action and source filters, read when argparse first needs
them: building the parser must not import pydantic (every command's start-up pays for
what the parser imports), and the vocabulary lives in the registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload


class LazyChoices(Sequence[str]):
    """A sequence read from ``load`` each time it is used (so an action registered later
    is a choice too)."""

    def __init__(self, load: Callable[[], Sequence[str]]) -> None:
        self._load = load

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(self._load())[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._load()))

    def __contains__(self, value: object) -> bool:
        return value in tuple(self._load())

    def __repr__(self) -> str:
        return repr(tuple(self._load()))


def _action_names() -> Sequence[str]:
    from orchestrator.domain.vocabulary import VOCABULARY

    return VOCABULARY.names()


def _source_names() -> Sequence[str]:
    from orchestrator.domain.proposals import Source

    return tuple(s.value for s in Source)


ACTIONS = LazyChoices(_action_names)
SOURCES = LazyChoices(_source_names)
