"""Bundle text made safe: delimiters defused, notes cleaned, directories shown by labels.

Also how the bundle measures text (UTF-8 bytes) and writes a size in a note.
"""

from __future__ import annotations

import re
from typing import Final

from orchestrator.recovery.cleaning import relative_paths
from orchestrator.redaction import redact

# Notes go into a delimiter line: short and single-line.
_MAX_NOTE_CHARS: Final = 300


# (label, absolute directory) pairs, longest directory first (see ``BundleInputs.roots``).
Roots = tuple[tuple[str, str], ...]


def _relative(text: str, roots: Roots) -> str:
    """``text`` with each root directory shown by its label, the longest first (a clone
    inside the state directory is named as the clone)."""
    for label, root in roots:
        text = relative_paths(text, {label: root})
    return text


def _utf8(text: str) -> bytes:
    # "replace": a lone surrogate (possible in a str built from JSON) must not raise.
    return text.encode("utf-8", errors="replace")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit, scale in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if n < scale << 10 or unit == "GiB":
            return f"{n / scale:.1f} {unit}"
    raise AssertionError("unreachable")


# Size-preserving (one ASCII character for another), so caps computed before it hold after
# it; idempotent, so render() may apply it again to a reloaded bundle.
_DELIMITER_LOOKALIKE: Final = re.compile(r"(?i)<<<(?=[ \t]*(?:begin|end)\b)")
_NOTE_UNSAFE: Final = re.compile(r"[\x00-\x1f\x7f<>]")


def neutralise(text: str) -> str:
    """Defuse anything in untrusted text that could pass for a section delimiter:
    ``<<<BEGIN`` / ``<<<END`` (any case, any spacing) become ``<<-BEGIN`` / ``<<-END``.
    Git conflict markers (``<<<<<<< HEAD``) are left alone."""
    return _DELIMITER_LOOKALIKE.sub("<<-", text)


def _clean_note(note: str) -> str:
    return _NOTE_UNSAFE.sub(" ", redact(note))[:_MAX_NOTE_CHARS]


def _join(*notes: str | None) -> str | None:
    present = [n for n in notes if n]
    return "; ".join(present) if present else None
