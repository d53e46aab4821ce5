"""What a terminal shows of a program's output: the text without its control sequences,
and each line as its last redraw left it.

Tools colour their output when told to (``pytest --color=yes``, ``FORCE_COLOR``,
``CARGO_TERM_COLOR=always``, a CI system that asks for colour), and a log then holds
``\\x1b[31mFAILED\\x1b[0m`` where a reader sees ``FAILED``. Progress meters (Maven's
transfer progress, curl's meter, spinners) redraw one line with carriage returns, and a
log then holds every frame. Everything that reads a log for meaning (the evidence
signatures, the infrastructure signs, the telling line) matches what the reader sees,
and what the model is shown carries no escape bytes and no stale frames (they cost
tokens and say nothing).

The sequences (ECMA-48): CSI (``ESC [`` parameters, intermediates, a final byte: colours,
cursor moves, erasing), OSC (``ESC ]`` up to BEL or ``ESC \\``: titles, hyperlinks), and
the two- and three-byte escapes (``ESC ( B``, ``ESC 7``). A redrawn line keeps what
follows its last carriage return (a CR before the line break, as in CRLF, is not a
redraw); a terminal would show the tail of a longer earlier frame past it, which a
meter clears or overwrites anyway.

Neither step holds or removes a line break (an OSC that would hold one is not taken as
one), so the n-th line of the plain text is the n-th line of the original. Pure.
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
# The frames of a redrawn line: from the line's start through its last carriage return
# that something other than the line break follows. Anchored at line starts, so a long
# line without one costs a single attempt.
_FRAMES: Final = rb"(?m)^(?:[^\n\r]*\r)+(?=[^\n])"

_SEQUENCE_BYTES: Final = re.compile(_SEQUENCE)
_SEQUENCE_TEXT: Final = re.compile(_SEQUENCE.decode("ascii"))
# A line break with carriage returns before it, more than one: a PTY's ``onlcr`` applied
# to CRLF output (Travis macOS jobs end every line so). A terminal shows the line: it is
# one CRLF line break, not a redraw of the line as empty.
_CRS_LF: Final = rb"\r\r+\n"
_FRAMES_BYTES: Final = re.compile(_FRAMES)
_CRS_LF_BYTES: Final = re.compile(_CRS_LF)
_CRS_LF_TEXT: Final = re.compile(_CRS_LF.decode("ascii"))
# A byte-order mark is invisible wherever it is (a log that concatenates the output of
# tools that write one holds it at the start of their first line).
_BOM: Final = "\ufeff"
_FRAMES_TEXT: Final = re.compile(_FRAMES.decode("ascii"))
# A carriage return that is not the end of a CRLF line break (nor the end of the data).
BARE_CR_BYTES: Final = re.compile(rb"\r[^\n]")


def plain_bytes(data: bytes) -> bytes:
    """``data`` as a reader sees it (the same object when it holds no ESC and no CR: the
    common case costs two ``memchr``)."""
    if b"\x1b" in data:
        data = _SEQUENCE_BYTES.sub(b"", data)
    if b"\r" in data:
        data = _FRAMES_BYTES.sub(b"", _CRS_LF_BYTES.sub(b"\r\n", data))
    if b"\xef\xbb\xbf" in data:
        data = data.replace(_BOM.encode(), b"")
    return data


def plain(text: str) -> str:
    """``text`` as a reader sees it."""
    if "\x1b" in text:
        text = _SEQUENCE_TEXT.sub("", text)
    if "\r" in text:
        text = _FRAMES_TEXT.sub("", _CRS_LF_TEXT.sub("\r\n", text))
    if _BOM in text:
        text = text.replace(_BOM, "")
    return text
