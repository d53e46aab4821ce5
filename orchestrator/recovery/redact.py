"""Secret redaction for everything that leaves the process (the context bundle above all).

``redact`` replaces credentials with ``[REDACTED]``: known token shapes (Anthropic, OpenAI,
GitHub, AWS access key ids, Slack, JWTs), ``Authorization`` header values, passwords in
URLs, PEM private-key blocks, and the value of any ``NAME=value`` / ``NAME: value`` /
``"name": "value"`` whose name says it is a secret (TOKEN, SECRET, KEY, PASSWORD, PASSWD,
CREDENTIAL). Names are kept, so the model still learns *which* setting was involved.

It errs towards redacting too much: ``monkey: banana`` loses its banana. A diagnosis that
misses one value is cheap; a key sent to a third party is not.

Linear time on any input: Python's ``re`` backtracks, so every pattern either starts only
at the beginning of a run of its characters (a negative lookbehind) and consumes that run
possessively (``++``, ``*+``: Python 3.11), or has a fixed length. No input makes a pattern
rescan text it has already consumed; ``tests/test_redact.py`` pins this on 1 MB inputs.

Fast on ordinary text: apart from PEM blocks every pattern matches within one line and
needs one of a few ASCII words (``_NEEDLES``), so only the lines containing one (found
with ``str.find`` on a lower-cased copy) go through the regular expressions. Keyword
matching is ASCII case-insensitive, so the lower-cased search cannot miss a match.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Final

REDACTED: Final = "[REDACTED]"

__all__ = ["REDACTED", "redact", "redact_bytes"]

# ---- PEM private keys ------------------------------------------------------------------
# Markers only; the block between them is found by a linear scan (``_redact_pem``), which
# also handles a block cut at either end — the excerpts we build are cut at arbitrary bytes.
_PEM_MARKER: Final = re.compile(
    r"-----(BEGIN|END) ?[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
)

# ---- token shapes (each is a secret on its own, whatever surrounds it) ------------------
_TOKEN: Final = re.compile(
    # Cheap prefilter: most positions fail here instead of trying every alternative (4x).
    r"(?=sk-|g[hi]|xox|eyJ|A[KS]IA)(?:"
    # Anthropic: the prefix is distinctive enough that any tail (even a cut one) goes.
    r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]*+"
    # OpenAI-style: ``sk-`` alone is too common a prefix, so only long ones.
    r"|(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}+"
    r"|(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{16,}+"
    r"|(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{16,}+"
    # AWS access key ids (long-lived AKIA and temporary ASIA).
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|(?<![A-Za-z0-9-])xox[abprs]-[A-Za-z0-9-]{6,}+"
    # JWT: base64url JSON header and payload both start with ``{"`` = ``eyJ``.
    r"|(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"
    r")"
)

# ---- scheme://user:password@host --------------------------------------------------------
# The lookbehind keeps starts to the beginning of a scheme-character run; the user part
# cannot contain '/', so no two candidate matches scan the same text.
_URL_PASSWORD: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<head>[A-Za-z][A-Za-z0-9+.-]*+://[^\s/:@]*+:)(?P<value>[^\s/@]++)@"
)

# ---- Authorization: Bearer <x> / token <x> / Basic <x> / <x> ---------------------------
_AUTH_HEADER: Final = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?P<head>(?ai:proxy-)?(?ai:authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
    r"(?:(?ai:bearer|token|basic|digest)[ \t]++)?)"
    r"(?P<value>[^\s\"']++)"
)

# ---- NAME=value, NAME: value, "name": "value", export NAME=value ------------------------
_NAME_CHAR = r"A-Za-z0-9_.\-"
_ASSIGNMENT: Final = re.compile(
    # A name starts where a run of name characters starts (linear: one attempt per run) ...
    rf"(?<![{_NAME_CHAR}])"
    # ... and contains a secret-ish word somewhere inside that same run ...
    rf"(?=[{_NAME_CHAR}]*?(?ai:token|secret|key|passw(?:or)?d|credential))"
    rf"(?P<name>[{_NAME_CHAR}]++)"
    # ... but is not an exception class: ``KeyError: 'x'`` is what a traceback is about.
    r"(?<!(?ai:error))(?<!(?ai:exception))(?<!(?ai:warning))"
    # '=' but not '==' or '=~' (comparisons); after a closing quote (possibly
    # JSON-escaped, "name": ...) ':' as well, otherwise only ': ' (YAML, HTTP headers) so
    # that ``user:token@host`` is left to the URL pattern and ``a::key`` to C++.
    r"(?P<sep>(?:\\?[\"'][ \t]*+(?:=(?![=~])|:(?![:=]))|[ \t]*+=(?![=~])|[ \t]*+:(?=[ \t]))"
    r"[ \t]*+)"
    # A quoted value to its closing quote (escapes honoured), else everything up to
    # whitespace — generous on purpose: a password may contain ',' or ')'.
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*+\"?|'(?:[^'\\\n]|\\.)*+'?|\S++)"
)


# Every match of a line pattern contains one of these (in ASCII lower case).
_NEEDLES: Final = (
    *("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    *("akia", "asia", "xox", "eyj"),  # _TOKEN
    "://",  # _URL_PASSWORD
    "authorization",  # _AUTH_HEADER
    *("token", "secret", "key", "passw", "credential"),  # _ASSIGNMENT
)
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _redact_pem(text: str) -> str:
    """Replace each private-key block with REDACTED. A BEGIN with no END runs to the end
    of the text (a head cut inside the block); an END with no BEGIN runs from the start of
    the text, or from the previous block (a tail cut inside the block)."""
    if "PRIVATE KEY" not in text:  # the common case costs one substring search
        return text
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    resume = 0  # where an orphan END's block would have to start
    for marker in _PEM_MARKER.finditer(text):
        if marker.group(1) == "BEGIN":
            if open_at is None:
                open_at = marker.start()
            continue
        spans.append((resume if open_at is None else open_at, marker.end()))
        open_at = None
        resume = marker.end()
    if open_at is not None:
        spans.append((open_at, len(text)))
    return _rewrite_spans(text, spans, lambda block: REDACTED)


def _rewrite_spans(text: str, spans: list[tuple[int, int]], rewrite: Callable[[str], str]) -> str:
    """``text`` with each (ordered, disjoint) span replaced by ``rewrite(span text)``."""
    if not spans:
        return text
    parts: list[str] = []
    position = 0
    for start, end in spans:
        parts.append(text[position:start])
        parts.append(rewrite(text[start:end]))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _keep_head(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED


def _url_password(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED + "@"


def _assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    # Keep the quotes so redacted JSON and shell lines still parse.
    quote = value[0] if value[0] in "\"'" else ""
    closing = quote if quote and len(value) > 1 and value.endswith(quote) else ""
    return match.group("name") + match.group("sep") + quote + REDACTED + closing


def _redact_lines(text: str) -> str:
    """The single-line patterns, in order. Correct on any text; ``redact`` hands it only
    the lines that could match."""
    text = _TOKEN.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(_url_password, text)
    text = _AUTH_HEADER.sub(_keep_head, text)
    return _ASSIGNMENT.sub(_assignment, text)


def _lower_same_length(text: str) -> str:
    """A lower-cased copy whose indices are those of ``text``. ``str.lower`` is fast and
    lowers ASCII exactly; when it changes the length (``'İ'`` becomes two characters),
    lower ASCII only."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _candidate_lines(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint (start, end) spans of whole lines that contain a needle. Each
    needle visits each line at most once: linear."""
    lowered = _lower_same_length(text)
    spans: list[tuple[int, int]] = []
    for needle in _NEEDLES:
        at = lowered.find(needle)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            end = lowered.find("\n", at)
            end = len(lowered) if end < 0 else end
            spans.append((start, end))
            at = lowered.find(needle, end)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + 1:  # overlapping or next line: one span
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def redact(text: str) -> str:
    """``text`` with every secret this module recognises replaced by ``[REDACTED]``.

    Pure, linear in ``len(text)``, and idempotent (``redact(redact(t)) == redact(t)``).
    """
    text = _redact_pem(text)
    # REDACTED contains no needle, so the lines to look at do not change as we redact.
    return _rewrite_spans(text, _candidate_lines(text), _redact_lines)


def redact_bytes(data: bytes) -> str:
    """Decode as UTF-8 (undecodable bytes become U+FFFD, never an exception), then redact."""
    return redact(data.decode("utf-8", errors="replace"))
