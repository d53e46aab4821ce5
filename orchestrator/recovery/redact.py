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
"""

from __future__ import annotations

import re
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
    r"(?i)(?<![A-Za-z0-9_-])"
    r"(?P<head>(?:proxy-)?authorization[\"']?[ \t]*+[:=][ \t]*+[\"']?"
    r"(?:(?:bearer|token|basic|digest)[ \t]++)?)"
    r"(?P<value>[^\s\"']++)"
)

# ---- NAME=value, NAME: value, "name": "value", export NAME=value ------------------------
_NAME_CHAR = r"A-Za-z0-9_.\-"
_ASSIGNMENT: Final = re.compile(
    # A name starts where a run of name characters starts (linear: one attempt per run) ...
    rf"(?<![{_NAME_CHAR}])"
    # ... and contains a secret-ish word somewhere inside that same run ...
    rf"(?=[{_NAME_CHAR}]*?(?i:token|secret|key|passw(?:or)?d|credential))"
    rf"(?P<name>[{_NAME_CHAR}]++)"
    # ... but is not an exception class: ``KeyError: 'x'`` is what a traceback is about.
    r"(?<!(?i:error))(?<!(?i:exception))(?<!(?i:warning))"
    # A closing quote (possibly JSON-escaped) for "name": ..., then '=' or ':' — but not
    # '==', '=~', '::' or ':=' (comparisons and scopes in code are not assignments).
    r"(?P<sep>(?:\\?[\"'])?[ \t]*+(?:=(?![=~])|:(?![:=]))[ \t]*+)"
    # A quoted value to its closing quote (escapes honoured), else everything up to
    # whitespace — generous on purpose: a password may contain ',' or ')'.
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*+\"?|'(?:[^'\\\n]|\\.)*+'?|\S++)"
)


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
    if not spans:
        return text
    parts: list[str] = []
    position = 0
    for start, end in spans:
        parts.append(text[position:start])
        parts.append(REDACTED)
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


def redact(text: str) -> str:
    """``text`` with every secret this module recognises replaced by ``[REDACTED]``.

    Pure, linear in ``len(text)``, and idempotent (``redact(redact(t)) == redact(t)``).
    """
    text = _redact_pem(text)
    text = _TOKEN.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(_url_password, text)
    text = _AUTH_HEADER.sub(_keep_head, text)
    return _ASSIGNMENT.sub(_assignment, text)


def redact_bytes(data: bytes) -> str:
    """Decode as UTF-8 (undecodable bytes become U+FFFD, never an exception), then redact."""
    return redact(data.decode("utf-8", errors="replace"))
