"""Long random-looking runs: the last rule, a bet on a value's shape alone.

A random value without a prefix or a telling name cannot be told from noise by its shape
alone, so the bet is stated here: a run of at least 32 characters of the base64/url
alphabet that mixes upper case, lower case and digits, has no lower-case run longer than
12 (a word of a path or an identifier) and at most one separator per 12 characters, is
taken for a secret — unless every part of it (split at ``-_./+~%``) reads as a word of an
identifier, a number or a hex digest (``rules0-exclude_rules0-True``,
``Win32_Devices_BiometricFramework``, ``cache-linux-<sha256>--rvm-default``): a
parametrised test id, a symbol, a path. A run that begins with plain words
(``/opt/worker/cache/IZ1x...``, ``taskcluster-Qh0al...``: a path, an id named by words)
is judged part by part, each part as if it stood alone. That trades a little
over-redaction (base64 blobs, some build ids) for recall in logs; where a secret and a
diagnosis conflict, the secret wins. Pure hex (git object names, digests) and UUIDs are
kept: a diagnosis needs them, and a hex key without a telling name is the price. Shorter
values are judged only by their name or prefix.

Public material is kept even when random: the value of a setting named public
(``public_key``, ``csrf-token``, ``integrity``), PEM public keys and certificates, a JWT
header alone, ``sha512-`` integrity digests, and ciphertext (SOPS ``ENC[...]``, Vault
``vault:v1:``).
"""

from __future__ import annotations

import base64
import bisect
import re
from functools import partial
from typing import Final

from orchestrator.redaction.blocks import in_sops_value, public_blocks
from orchestrator.redaction.placeholders import REDACTED, is_dummy
from orchestrator.redaction.words import (
    DIGIT,
    HEX_PART,
    PART_SEPARATORS,
    REAL_WORD,
    made_of_words,
)

# A run of 32+ base64/url characters with an upper-case letter, a lower-case letter and a
# digit in it (each lookahead stays inside the run: linear). ``_looks_random`` judges the
# rest.
_RUN = r"A-Za-z0-9+/_\-~%"
_CANDIDATE: Final = re.compile(
    rf"(?<![{_RUN}=.])(?=[{_RUN}]{{32}})(?=[a-z0-9+/_\-~%]*+[A-Z])(?=[A-Z0-9+/_\-~%]*+[a-z])"
    rf"(?=[A-Za-z+/_\-~%]*+[0-9])[{_RUN}]{{32,}}+={{0,2}}"
)
# A setting whose name says it is public: its value is kept even when it looks random.
_PUBLIC_NAME: Final = re.compile(
    r"(?ai:public|pub|csrf|xsrf|authenticity|integrity|checksum|digest|sha[0-9]*|etag|nonce"
    r"|commit|revision|uuid|guid)"
)
# The name before a value, read backwards (``"name": "`` reversed): matched from the
# value's start, it costs the length of the name.
_NAME_BEFORE_REVERSED: Final = re.compile(
    r"[\"'`]?[ \t]*(?:>=|[:=])[ \t]*\]?[\"'`]?(?P<name>[A-Za-z0-9_.\-]{1,80})"
)


_LOWER_WORD: Final = re.compile(r"[a-z]{13}")


def _looks_random(token: str) -> bool:
    """At least 32 characters mixing upper case, lower case and digits, with no run of
    lower-case letters long enough to be a word of a path or an identifier, at most
    one separator per twelve characters (a random base64 value has one per thirty), and
    not made of words (``made_of_words``). Pure hex and UUIDs (git object names, digests,
    request ids) are left to the reader."""
    core = token.strip("=")
    if len(core) < 32 or core.lower() == core or core.upper() == core:
        return False  # (too short, or one case only)
    if len(DIGIT.findall(core)) < 2:
        return False
    separators = core.count("/") + core.count("-") + core.count("_")
    if separators > max(4, len(core) // 12):
        return False
    return _LOWER_WORD.search(core) is None and not made_of_words(core)


def _random_parts(token: str) -> str:
    """``token`` with what looks random in it replaced. A run that holds a word in its own
    right (``/opt/worker/cache/IZ1x...``, ``taskcluster-Qh0alAz...``: a path, or an id
    with a word before it) is judged part by part, each part as if it stood alone (so a
    random part under 32 characters stays, as it would alone); any other run is judged
    whole."""
    whole = _looks_random(token)
    if "+" in token or token.endswith("="):
        return REDACTED if whole else token  # base64's, never a path's or an id's
    parts = [part for part in PART_SEPARATORS.split(token) if part]
    long_parts = [part for part in parts if len(part) >= 32]
    if not whole and not long_parts:
        return token  # (the common case, decided without looking at words)
    if not _begins_with_words(parts):
        return REDACTED if whole else token
    if not any(_looks_random(part) for part in long_parts):
        return token
    return _redact_parts(token)


def _begins_with_words(parts: list[str]) -> bool:
    """The parts before the first that is no plain word (one word in one case, a number,
    a hex digest) hold a word of four letters or more and eight letters in all
    (``/opt/worker/...``, ``taskcluster-...``): a path or an id named by words. (A random
    value's first part reads as camelCase now and then, ``dxyTVGLfvZNOkenli``; it is
    seldom one plain word of eight letters.)"""
    letters = 0
    real = False
    for part in parts:
        if not (_PLAIN_PART.fullmatch(part) or HEX_PART.fullmatch(part)):
            break
        letters += sum(c.isalpha() for c in part)
        real = real or REAL_WORD.search(part) is not None
    return real and letters >= 8


_PLAIN_PART: Final = re.compile(r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)[0-9]*|[0-9]+")


def _redact_parts(token: str) -> str:
    out: list[str] = []
    position = 0
    for gap in PART_SEPARATORS.finditer(token):
        out.append(_one_part(token[position : gap.start()]))
        out.append(gap.group(0))
        position = gap.end()
    out.append(_one_part(token[position:]))
    return "".join(out)


def _one_part(part: str) -> str:
    return REDACTED if _looks_random(part) else part


def _random_token(found: set[str], public: list[tuple[int, int]], match: re.Match[str]) -> str:
    token = match.group(0)
    rewritten = _random_parts(token)
    if rewritten == token or is_dummy(token):
        return token
    if public:
        at = bisect.bisect_right(public, (match.start(), len(match.string))) - 1
        if at >= 0 and public[at][0] <= match.start() < public[at][1]:
            return token
    if _jose_header(match):  # a JWT's header alone says which algorithm, nothing more
        return token
    if token.startswith(("sha1-", "sha256-", "sha384-", "sha512-")):
        return token  # a subresource-integrity digest (lock files, npm)
    text = match.string
    if in_sops_value(text, match.start()):
        return token  # ciphertext: the key that opens it is elsewhere
    window = text[max(0, match.start() - 100) : match.start()]
    named = _NAME_BEFORE_REVERSED.match(window[::-1])
    if named is not None and _PUBLIC_NAME.search(named.group("name")[::-1]):
        return token  # ``public_key = "..."``, ``csrf-token=...``
    # Not remembered: the same rule finds every other occurrence by itself.
    return rewritten


def _jose_header(match: re.Match[str]) -> bool:
    """``eyJhbGciOi...`` standing alone (no '.' beside it) that decodes to a JSON object
    with an ``"alg"``: a JWT's header, public by design."""
    token, text = match.group(0), match.string
    if not token.startswith("eyJ") or "." in (
        text[match.start() - 1 : match.start()] + text[match.end() : match.end() + 1]
    ):
        return False
    try:
        decoded = base64.urlsafe_b64decode(token.rstrip("=") + "=" * (-len(token.rstrip("=")) % 4))
    except ValueError:
        return False
    return b'"alg"' in decoded


def redact_random_runs(text: str, found: set[str]) -> str:
    """``text`` with every random-looking run outside a public block redacted (one pass).
    Not remembered in ``found``: the rule finds every other occurrence by itself."""
    return _CANDIDATE.sub(partial(_random_token, found, public_blocks(text)), text)
