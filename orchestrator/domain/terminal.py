"""What a terminal shows of a program's output: the text without its control sequences.

Tools colour their output when told to (``pytest --color=yes``, ``FORCE_COLOR``,
``CARGO_TERM_COLOR=always``, a CI system that asks for colour), and a log then holds
``\\x1b[31mFAILED\\x1b[0m`` where a reader sees ``FAILED``. Everything that reads a log
for meaning (the evidence signatures, the infrastructure signs, the telling line) matches
what the reader sees, and what the model is shown carries no escape bytes (they cost
tokens and say nothing).

The sequences (ECMA-48): CSI (``ESC [`` parameters, intermediates, a final byte: colours,
cursor moves, erasing), OSC (``ESC ]`` up to BEL or ``ESC \\``: titles, hyperlinks), and
the two- and three-byte escapes (``ESC ( B``, ``ESC 7``). None of them holds a line
break (an OSC that would is not taken as one), so removing them never joins or splits a
line: the n-th line of the plain text is the n-th line of the original. Pure.
"""

from __future__ import annotations

import re
from typing import Final

_SEQUENCE: Final = (
    rb"\x1b(?:"
    rb"\[[0-?]*[ -/]*[@-~]"  # CSI
    rb"|\][^\x07\x1b\n]*(?:\x07|\x1b\\)"  # OSC, ended by BEL or ST
    rb"|[ -/]*[0-Z\\-~]"  # the rest: nF (ESC ( B), Fp (ESC 7), Fe, Fs; not '[' alone
    rb")"
)
SEQUENCE_BYTES: Final = re.compile(_SEQUENCE)
SEQUENCE: Final = re.compile(_SEQUENCE.decode("ascii"))


def plain_bytes(data: bytes) -> bytes:
    """``data`` without its terminal control sequences (the same object when it has no
    ESC byte: the common case costs one ``memchr``)."""
    return SEQUENCE_BYTES.sub(b"", data) if b"\x1b" in data else data


def plain(text: str) -> str:
    """``text`` without its terminal control sequences."""
    return SEQUENCE.sub("", text) if "\x1b" in text else text
