"""Secrets redacted by their value: the ones this process holds (issue 40, item 3).

The shape rules find a key by how it looks; a key that does not look like one (a
password, a webhook URL, an approval key of no vendor's shape) or a known key printed
reversed or base64-encoded goes past them. But the orchestrator knows every secret it
holds, so each is removed by its value, in the forms a program prints it in:

* as it is, and reversed;
* base64, standard and URL-safe, with and without padding; inside a longer base64 text
  (``user:token`` in a Basic header) a secret is encoded differently at each of the 3
  byte offsets, and only the groups made of its own bytes alone are the same whatever
  surrounds it: those (its stable middle) are matched at each offset, so at most two
  bytes of its edges survive, encoded with its neighbours';
* URL-encoded (``quote`` and ``quote_plus``, with ``/`` kept or escaped, escapes in
  upper and lower case);
* hex, lower and upper case;
* inside a JSON string (quotes and backslashes escaped, ``/`` as ``\\/`` too).

A value is not held when it is too short or too common to be a secret
(``worth_holding``): shorter than ``MIN_CHARS`` (8: the shortest password a service
commonly accepts; a shorter value, ``main`` or ``4242``, would blank ordinary words and
numbers everywhere), a number, a word in one case (``production``, ``changeme``: a
variable ``pass_env`` names need not hold a secret), or a path (where a secret is,
never the secret). Every form shorter than ``MIN_CHARS`` is dropped for the same reason.

Linear, and about one pass of a C loop over the text: every form is at least 8 bytes,
so wherever one occurs it covers an aligned 4-byte word of the text's UTF-8 encoding,
and one of 15 bytes or more an aligned 8-byte word. One telling word of each form per
alignment is indexed (``_words``); the text's aligned words are tested against the
index in one set operation, without a Python step per position. Only the forms behind
a word that was found are then searched for with ``find``. Measured on the real-log
corpus with 50 secrets (``bench/bench_held_redaction.py``): a regular expression
holding the forms as a trie took 57 % of ``redact``'s time; the word index takes
11-22 % (1.09x in all: 15.1 s against 13.9 s for 61 MB).

Which values a process holds is the caller's: ``HeldSecrets(values)`` for a test, the
process-wide registry (``hold``, ``holding``, ``process_held``) that ``redact`` reads by
default, filled where the process starts (``cli/main.py``), where a run's services are built
(``app/services.py``) and where a stage is handed its ``pass_env`` values
(``execution/stage_env.py``). Standard library only, as the whole package.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar
from urllib.parse import quote, quote_plus

from orchestrator.redaction.placeholders import REDACTED

MIN_CHARS: Final = 8
_LONG: Final = 8  # bytes in a word of the long forms' index
_SHORT: Final = 4
_NUMBER: Final = re.compile(r"[0-9.,:/ +-]*")
_WORD: Final = re.compile(r"[a-z]+|[A-Z]+|[A-Z][a-z]+")
_ESCAPE: Final = re.compile(r"%[0-9A-F]{2}")
T = TypeVar("T", str, bytes)


def worth_holding(value: str) -> bool:
    """Whether ``value`` can be told from ordinary text: 8 characters or more, and not a
    number, a word in one case or a path."""
    value = value.strip()
    if len(value) < MIN_CHARS or value in REDACTED:  # (a part of the mark: never again)
        return False
    if _NUMBER.fullmatch(value) or _WORD.fullmatch(value):
        return False
    return not value.startswith(("/", "./", "../", "~/"))


def _lower_escapes(text: str) -> str:
    return _ESCAPE.sub(lambda m: m.group(0).lower(), text)


def _url_safe(text: str) -> str:
    return text.replace("+", "-").replace("/", "_")


def encodings(value: str) -> frozenset[str]:
    """The forms ``value`` is matched in (each ``MIN_CHARS`` or longer)."""
    value = value.strip()
    raw = value.encode("utf-8", "surrogatepass")
    forms = {value, value[::-1], raw.hex(), raw.hex().upper()}
    for escaped in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        forms.update((escaped, escaped.replace("/", "\\/")))  # a JSON string, ``\/`` too
    for safe in ("", "/"):
        for quoted in (quote(value, safe=safe), quote_plus(value, safe=safe)):
            forms.update((quoted, _lower_escapes(quoted)))
    coded: set[str] = set()
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        if offset == 0:
            coded.update((text, text.rstrip("=")))
        # the groups of 3 bytes that are the value's alone, 4 characters each
        first = 1 if offset else 0
        last = (offset + len(raw)) // 3
        coded.add(text[4 * first : 4 * last])
    forms.update(coded)
    forms.update(_url_safe(form) for form in coded)
    return frozenset(form for form in forms if len(form) >= MIN_CHARS)


_DIGITS_AND_CAPITALS: Final = bytes(range(48, 58)) + bytes(range(65, 91))


def _telling(window: bytes) -> int:
    """How unlike ordinary text a window reads: distinct bytes, digits and capitals
    (``Xq8rTzLm`` over ``https://``). Counted in C (``translate``): every CLI start
    indexes the secrets it holds, a few dozen forms each."""
    return len(set(window)) + len(window) - len(window.translate(None, _DIGITS_AND_CAPITALS))


def _words(data: bytes, size: int) -> Iterator[int]:
    """The words a form is indexed by, as the integers a text's aligned words are read as
    (native byte order, as ``memoryview.cast`` reads them). Wherever the form stands in
    a text, the aligned words inside it are its windows at offsets ``phase``,
    ``phase + size``, ... for one ``phase`` below ``size``; so one window of each phase
    is enough, and the most telling one is taken: a form with a common part (a webhook
    URL's ``https://``) does not make every text that has it a candidate."""
    for phase in range(size):
        windows = [data[at : at + size] for at in range(phase, len(data) - size + 1, size)]
        yield int.from_bytes(max(windows, key=_telling), sys.byteorder)


def _found_in(words: memoryview[int], index: dict[int, set[bytes]], found: set[bytes]) -> None:
    """Add to ``found`` the forms of ``index`` behind any of ``words``: one pass in C when
    none is there (the common case), a second to learn which when one is."""
    if index.keys().isdisjoint(words):
        return
    for word in index.keys() & words:
        found.update(index[word])


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _spans(haystack: T, forms: Iterable[T]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for form in forms:
        at = haystack.find(form)
        while at >= 0:
            spans.append((at, at + len(form)))
            at = haystack.find(form, at + 1)
    return _merged(spans)


def _replaced(haystack: T, spans: list[tuple[int, int]], mark: T) -> T:
    parts: list[T] = []
    position = 0
    for start, end in spans:
        parts += (haystack[position:start], mark)
        position = end
    parts.append(haystack[position:])
    return haystack[:0].join(parts)


class HeldSecrets:
    """A matcher for a set of secret values and their encodings. Immutable."""

    __slots__ = ("_long", "_short", "longest", "values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: frozenset[str] = frozenset(v.strip() for v in values if worth_holding(v))
        self._long: dict[int, set[bytes]] = {}
        self._short: dict[int, set[bytes]] = {}
        self.longest = 0  # the longest form, in UTF-8 bytes
        for value in self.values:
            for form in encodings(value):
                data = form.encode("utf-8", "surrogatepass")
                self.longest = max(self.longest, len(data))
                long = len(data) >= 2 * _LONG - 1
                index, size = (self._long, _LONG) if long else (self._short, _SHORT)
                for word in _words(data, size):
                    index.setdefault(word, set()).add(data)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __or__(self, values: Iterable[str]) -> HeldSecrets:
        return HeldSecrets(self.values.union(values))

    def _candidates(self, data: bytes) -> set[bytes]:
        """The forms (UTF-8) one of whose words is among the aligned words of ``data``."""
        found: set[bytes] = set()
        if self._long and len(data) >= _LONG:
            _found_in(memoryview(data)[: len(data) // _LONG * _LONG].cast("Q"), self._long, found)
        if self._short and len(data) >= _SHORT:
            _found_in(
                memoryview(data)[: len(data) // _SHORT * _SHORT].cast("I"), self._short, found
            )
        return found

    def redact(self, text: str) -> str:
        """``text`` with every held value, in every form, replaced by ``[REDACTED]``."""
        if not self.values or len(text) < MIN_CHARS:
            return text
        found = self._candidates(text.encode("utf-8", "surrogatepass"))
        if not found:
            return text
        forms = (form.decode("utf-8", "surrogatepass") for form in found)
        spans = _spans(text, forms)
        return _replaced(text, spans, REDACTED) if spans else text

    def spans_in(self, data: bytes) -> list[tuple[int, int]]:
        """Where the held values' forms are in ``data`` (bytes as a log keeps them: UTF-8
        or not), merged and in order."""
        if not self.values or len(data) < MIN_CHARS:
            return []
        found = self._candidates(data)
        return _spans(data, found) if found else []


class _Registry:
    """The process's held secrets. Replaced whole (an immutable matcher), never changed
    in place, so a thread that reads it never sees half an update."""

    def __init__(self) -> None:
        self.held = HeldSecrets()
        self.lock = threading.Lock()


_REGISTRY: Final = _Registry()


def process_held() -> HeldSecrets:
    """What this process holds now (what ``redact`` removes by value by default)."""
    return _REGISTRY.held


def hold(values: Iterable[str]) -> None:
    """Hold ``values`` too, from now on (a ``pass_env`` value read when a stage starts)."""
    new = {v.strip() for v in values if worth_holding(v)}
    with _REGISTRY.lock:
        if not new <= _REGISTRY.held.values:
            _REGISTRY.held = _REGISTRY.held | new


@contextmanager
def holding(values: Iterable[str]) -> Iterator[HeldSecrets]:
    """Hold ``values`` for the block; what was held before is held again after it
    (whatever ``hold`` added inside), so a test that runs the CLI in its own process
    keeps nothing held."""
    with _REGISTRY.lock:
        before = _REGISTRY.held
        _REGISTRY.held = before | values
    try:
        yield _REGISTRY.held
    finally:
        with _REGISTRY.lock:
            _REGISTRY.held = before
