"""Untrusted text made safe to place in the context bundle, secrets aside (those are
``orchestrator.redaction``'s): look-alike characters folded to the delimiters they mimic,
and this machine's directories shown by their labels."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["neutralise_unicode", "relative_paths"]


# ---- untrusted text next to delimiters --------------------------------------------------


def neutralise_unicode(text: str) -> str:
    """``text`` in the form delimiters are matched in: NFKC (fullwidth and compatibility
    forms become ASCII), format characters (category Cf: zero-width spaces and joiners,
    bidi controls) removed, and every space separator (Zs: no-break, en, em, ideographic
    ...) made a plain space. A look-alike of a delimiter then *is* the delimiter, and the
    code that neutralises delimiters sees it."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    # (only the runs of non-ASCII characters are looked at: a character at a time over a
    # whole log costs seconds)
    return _NOT_ASCII.sub(_plain_spaces, text)


_NOT_ASCII: Final = re.compile(r"[^\x00-\x7f]+")


def _plain_spaces(run: re.Match[str]) -> str:
    return "".join(
        " " if (category := unicodedata.category(c)) == "Zs" else "" if category == "Cf" else c
        for c in run.group(0)
    )


# ---- paths of this machine --------------------------------------------------------------


def relative_paths(text: str, roots: dict[str, str]) -> str:
    """``text`` with each absolute root directory (the clone, the state directory) shown
    by its label: ``/home/ci/.state/runs/X/clone/src/a.py`` becomes ``<clone>/src/a.py``.
    The model needs where a file is in the project, not where this machine keeps it.
    Longest root first, so a clone inside the state directory is named as the clone."""
    for label, given in sorted(roots.items(), key=lambda item: len(item[1]), reverse=True):
        root = given.rstrip("/")
        if root:
            text = re.sub(re.escape(root) + r"(?=/|\b|$)", label, text)
    return text
