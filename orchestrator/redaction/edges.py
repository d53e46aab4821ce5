"""What a cut may have split: a window of a log loses its partial edge lines before it is
redacted, because a secret cut in two is no longer recognisable."""

from __future__ import annotations

import re


def drop_cut_edges(window: bytes, *, cut_before: bool, cut_after: bool) -> bytes:
    """``window`` without what a cut may have split: the partial first line when the
    source was cut before it, the partial last line when cut after it. A secret split by
    the cut has lost the part that makes it recognisable, so redaction cannot find it;
    dropping the whole partial line (however far its end is) is the only safe edge. With
    no line break at all, the partial run of non-blank characters goes instead."""
    if cut_before:
        newline = window.find(b"\n")
        if newline >= 0:
            window = window[newline + 1 :]
        else:
            blank = re.search(rb"\s", window)
            window = window[blank.start() :] if blank else b""
    if cut_after:
        newline = window.rfind(b"\n")
        if newline >= 0:
            window = window[: newline + 1]
        else:
            blanks = [window.rfind(c) for c in (b" ", b"\t", b"\r", b"\f", b"\v")]
            window = window[: max(blanks) + 1] if max(blanks) >= 0 else b""
    return window
