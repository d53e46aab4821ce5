"""Secret redaction for everything that leaves the process (the context bundle above all).

``redact`` replaces credentials with ``[REDACTED]``:

* token shapes that are secrets on their own, wherever they stand: vendor-prefixed keys
  (Anthropic, OpenAI, GitHub, GitLab, Slack, Stripe, AWS, Google ``AIza``, Hugging Face,
  npm, PyPI, SendGrid, and some eighty more), JWTs, PEM private-key blocks;
* passwords in URLs (``scheme://user:password@host``) and in ``-u user:password``;
* ``Authorization`` header values (any scheme word: ``Bearer``, ``Api-Token`` ...);
* the value of a setting whose name says it is a secret: ``NAME=value`` and every other
  assignment spelling (``:=``, ``::=``, ``?=``, ``+=``, ``.=``, ``=>``, ``: ``, JSON,
  ``--token value``), an XML element or ``key="..Password" value="..."`` pair, and a
  value alone on the next line of ``<nameToken>``. The name is kept, so the model still
  learns *which* setting was involved;
* long random-looking tokens (``_looks_random``): at least 32 characters of base64/url
  alphabet mixing upper case, lower case and digits. A random value without a prefix
  cannot be told from noise by its shape alone, so this rule trades a little
  over-redaction (hashes in base64, some build ids) for recall in logs; pure hex (git
  object names, digests) and UUIDs are kept, a diagnosis needs them.

A value that is plainly not a secret is kept: a placeholder (``${VAR}``, ``<token>``,
``xxxx``, ``****``, ``%s``), a reference to code (``var.db_password``), an empty string.
Names that hold a key's *name* rather than the key (``primaryKey``, ``key_id``,
``TokenFile``, ``secret_length``) are not secret names.

Linear time on any input: Python's ``re`` backtracks, so every pattern either starts only
at the beginning of a run of its characters (a negative lookbehind) and consumes that run
possessively (``++``, ``*+``: Python 3.11), or has a bounded length. ``tests/recovery/
test_redact.py`` pins this on 1 MB inputs.

Fast on ordinary text: apart from PEM blocks every pattern matches within one line (or
two, for a next-line value) and needs either one of a few ASCII words (``_NEEDLES``,
found with ``str.find`` on a lower-cased copy) or a run of 20+ token characters (one
regular-expression pass), so only those lines go through the other expressions.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable
from functools import partial
from typing import Final

REDACTED: Final = "[REDACTED]"

__all__ = [
    "REDACTED",
    "drop_cut_edges",
    "neutralise_unicode",
    "redact",
    "redact_bytes",
    "relative_paths",
]

# ---- PEM private keys ------------------------------------------------------------------
# Markers only; the block between them is found by a linear scan (``_redact_pem``), which
# also handles a block cut at either end — the excerpts we build are cut at arbitrary bytes.
_PEM_MARKER: Final = re.compile(
    r"-----(BEGIN|END)[ ?]?[A-Z0-9 ?]{0,40}PRIVATE[ ?]KEY(?:[ ?]BLOCK)?-----",
)

# ---- token shapes (each is a secret on its own, whatever surrounds it) ------------------
_TC = r"A-Za-z0-9_\-"  # token characters
# Vendor prefixes followed by at least this many token characters. Case-sensitive: the
# prefixes are distinctive in the case their vendors write them.
_VENDOR_PREFIXES: Final = (
    # source hosting, CI, package registries
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-"),
    *("glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glcbt-", "glffct-", "glsoat-"),
    *("GR1348941", "_gitlab_session=", "npm_", "pypi-", "rubygems_", "CLOJARS_"),
    *("CCIPAT_", "dckr_pat_", "ATATT", "ATCTT", "ATBB", "rdme_", "sqp_", "sqa_", "squ_"),
    *("sqco_", "oy2", "pul-", "nfp_", "sbp_", "sntrys_", "sntryu_", "figr_", "figp_"),
    # cloud and infrastructure
    *("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "ABSK", "bedrock-api-key-", "AIza", "ya29."),
    *("LTAI", "dop_v1_", "doo_v1_", "dor_v1_", "hvs.", "hvb.", "HRKU-", "dp.pt.", "dp.ct."),
    *("dp.st.", "dp.sa.", "dp.scim.", "dp.audit.", "dt0c01.", "tskey-", "fo1_", "fm1a_"),
    *("fm1r_", "fm2_", "FlyV1 ", "dapi", "dnkey-", "pscale_pw_", "pscale_tkn_", "pscale_oauth_"),
    *("shpss_", "shpat_", "shpca_", "shppa_", "sl.", "AGE-SECRET-KEY-1", "ops_eyJ"),
    *("sha256~", "cfut_", "cfat_", "v1.0-", "glc_", "glsa_", "p8e-", "lin_api_", "PMAK-"),
    *("pnu_", "ico-", "NRAK-", "NRJS-", "NRII-", "NRAA-", "NRRA-", "API-", "tk-us-"),
    *("sm_pat_", "sm_aat_", "sm_sat_", "ntn_", "secret_", "xkeysib-", "SG.", "EZAK", "EZTK"),
    *("FLWSECK", "FLWPUBK", "master-", "EAA", "pat", "shippo_live_", "shippo_test_"),
    # model providers
    *("sk-", "xai-", "gsk_", "pplx-", "r8_", "hf_", "api_org_", "lsv2_pt_", "lsv2_sk_"),
    # payments, messaging, mail
    *("sk_live_", "rk_live_", "sk_test_", "rk_test_", "pk_live_", "sq0atp-", "sq0csp-"),
    *("EAAA", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xapp-", "key-"),
    *("pubkey-", "duffel_test_", "duffel_live_", "live_", "test_pub_", "test_", "AKCp"),
    *("cmVmd", "fio-u-", "s-s4t2ud-", "s-s4t2af-", "SK", "AC", "sc_"),
)
# Prefixes that are common word starts: they need a longer body with digits in it.
_WEAK_PREFIXES: Final = frozenset(
    {"pat", "secret_", "live_", "test_", "key-", "API-", "SK", "AC", "master-", "EAA", "sc_"}
)
_STRONG: Final = sorted((p for p in _VENDOR_PREFIXES if p not in _WEAK_PREFIXES), key=len)
_WEAK: Final = sorted(_WEAK_PREFIXES, key=len)
_BY_LENGTH: Final = sorted(_VENDOR_PREFIXES, key=len, reverse=True)
_TOKEN: Final = re.compile(
    rf"(?<![{_TC}.])(?:"
    # Anthropic: distinctive enough that any tail (even a cut one) goes.
    r"sk-ant-[A-Za-z0-9_-]*+"
    rf"|(?:{'|'.join(re.escape(p) for p in reversed(_STRONG))})[{_TC}.+/=~]{{12,}}+"
    # (not a path component: ``/tmp/test_a_case_name0/x`` is no Lob key)
    rf"|(?<!/)(?:{'|'.join(re.escape(p) for p in reversed(_WEAK))})"
    rf"(?=[{_TC}.]{{0,60}}[0-9])[{_TC}.+=]{{16,}}+(?!/)"
    # JWT: base64url JSON header and payload both start with ``{"`` = ``eyJ``.
    r"|eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"
    # Hashicorp service tokens, Telegram bot tokens, Slack/Teams/Discord webhooks.
    r"|s\.(?=[a-zA-Z]{0,23}[0-9])(?=[a-z0-9]{0,23}[A-Z])[A-Za-z0-9]{24}(?![A-Za-z0-9])"
    r"|[0-9]{8,10}:AA[A-Za-z0-9_-]{33}"
    r"|(?:https?://)?(?:hooks\.slack\.com/(?:services|workflows|triggers)"
    r"|discord(?:app)?\.com/api/webhooks|[a-z0-9-]+\.webhook\.office\.com/webhookb2)/\S++"
    # JFrog (AKC…, AP[0-9A-F]…), Discord bot tokens, Azure AD client secrets (…8Q~…),
    # Mailchimp (…-us12), Facebook app tokens (id|secret), Terraform Cloud, Twilio.
    r"|(?:AKC|AP[0-9A-F])[A-Za-z0-9]{10,}+"
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}+"
    r"|[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}+"
    r"|[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"
    r"|[0-9]{15,16}\|[A-Za-z0-9_-]{27}(?![A-Za-z0-9_-])"
    r"|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}+"
    r"|(?:SK|AC)[0-9a-fx]{32}(?![A-Za-z0-9])"
    r")"
)

# ---- scheme://user:password@host, -u user:password --------------------------------------
# The lookbehind keeps starts to the beginning of a scheme (a diff's '+' marker may stand
# before it: '+' is not in the lookbehind); the user part cannot contain '/', so no two
# candidate matches scan the same text.
_URL_PASSWORD: Final = re.compile(
    r"(?<![A-Za-z0-9.-])(?P<head>[A-Za-z][A-Za-z0-9+.-]*+://[^\s/:@'\"]*+:)"
    r"(?P<value>[^\s/@'\"]++)@"
)
# curl -u user:password, --user "user:password" (the whole pair goes: either half may be
# the secret, ``-u ":password"`` and ``-u "apikey:"`` are both common).
_USER_FLAG: Final = re.compile(
    r"(?<![\w-])(?P<head>(?:-u|--user)[ \t=]++)"
    r"(?P<value>\"[^\"\n]*:[^\"\n]*+\"(?::\"[^\"\n]*+\")?|'[^'\n]*:[^'\n]*+'"
    r"|[^\s'\":]*+:(?:'[^'\n]*+'|\"[^\"\n]*+\"|[^\s]*+))"
)
# --token value, --password=value, --api-key value
_SECRET_FLAG: Final = re.compile(
    r"(?<![\w-])(?P<head>--?[A-Za-z0-9-]*?(?ai:token|secret|passw(?:or)?d|api-?key|pat)"
    r"(?:[ \t]++|=))(?P<value>[^\s-][^\s]*+)"
)

# ---- Authorization: Bearer <x> / Api-Token <x> / Basic <x> / <x> -----------------------
_AUTH_HEADER: Final = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?P<head>(?ai:proxy-)?(?ai:authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
    r"(?:[A-Za-z][A-Za-z-]{1,20}[ \t]++(?=\S))?)"
    r"(?P<value>[^\s\"']++)"
)

# ---- NAME=value and its relatives -------------------------------------------------------
_NAME_CHAR = r"A-Za-z0-9_.\-"
_SECRET_WORD = (
    r"(?:token|secrete?|key|passw(?:or)?d|pwd|pass|pw|creds|credentials?|apikey|auth"
    r"|sonar[._]login)"
)
_ASSIGNMENT: Final = re.compile(
    # A name starts where a run of name characters starts (linear: one attempt per run) ...
    rf"(?<![{_NAME_CHAR}$])\$?"
    rf"(?=[{_NAME_CHAR}]*?(?ai:{_SECRET_WORD})|BUNDLE_)"
    rf"(?P<name>[{_NAME_CHAR}]++)"
    # separators: = := ::= :::= ?= += .= => and ': ' (YAML, headers), '"name": '
    r"(?P<sep>(?:\\?[\"'`])?[ \t]*+(?:\[\])?[ \t]*+"
    r"(?:[:?+.]{0,3}=(?![=~])>?|=>|:(?=[ \t\"'`])|:(?=\\?\"))[ \t]*+@?)"
    # A quoted value to its closing quote (escapes honoured), else everything up to
    # whitespace — generous on purpose: a password may contain ',' or ')'.
    r"(?P<value>\\\"(?:[^\"\\\n]|\\[^\"])*+(?:\\\")?"
    r"|\"(?:[^\"\\\n]|\\.)*+\"?|'(?:[^'\\\n]|\\.)*+'?|`[^`\n]*+`?|[^\s,;]++)"
)
# The last word of a name that holds a key's name, a file or an id rather than a secret.
_QUALIFIER: Final = re.compile(
    r"(?ai)(?:^|[_.\-]|(?<=[a-z0-9]))(?:id|ids|name|names|file|files|path|dir|url|uri|length|len"
    r"|size|type|types|hash|event|selector|store|vault|pair|chars|str|pressed|count|format"
    r"|version|field|header|prefix|suffix|env|var|ref|arn|alias|label|index|mode|algorithm"
    r"|meshing|signatures?|enabled|expiry|expires|ttl|timeout|location|spec|policy|provider"
    r"|manager|service|endpoint|host|port|region|table|column|class|method|handler|factory"
    r"|generator|error|exception|warning|util|utils|helper|validator|template|secrets)[0-9]*$"
)
# Bundler keeps a host's credentials in BUNDLE_<HOST>__<TLD>.
_BUNDLER_HOST: Final = re.compile(r"BUNDLE_[A-Z0-9_]+__[A-Z]{2,6}$")
# ``if (password == "literal")`` and ``"literal" != api_key``: a literal compared with a
# secret is the secret.
# (a lookahead finds the word, then the run is taken possessively: linear)
_NAME_WORD = rf"(?=[A-Za-z0-9_.]*?(?ai:{_SECRET_WORD}))[A-Za-z0-9_.]++"
_COMPARISON: Final = re.compile(
    rf"(?<![A-Za-z0-9_.])(?P<name>{_NAME_WORD})[ \t]*+[!=]==?[ \t]*+"
    r"(?P<value>\"[^\"\n]*+\"|'[^'\n]*+')"
    r"|(?P<value2>\"[^\"\n]*+\"|'[^'\n]*+')[ \t]*+[!=]==?[ \t]*+"
    rf"(?P<name2>{_NAME_WORD})"
)
# ``secret("literal")``, ``password "literal"``, ``secret.assign("literal", 17)``
_CALL_ARG: Final = re.compile(
    rf"(?<![A-Za-z0-9_.])(?P<name>{_NAME_WORD})(?:\[[0-9]*\])?"
    r"(?:[ \t]++|\(|\.assign\()@?(?P<value>\"[^\"\n]*+\"|'[^'\n]*+')"
)
# <add key="ClearTextPassword" value="..." />
_XML_KEY_VALUE: Final = re.compile(
    rf"(?P<head>key=\"[^\"\n]*?(?ai:{_SECRET_WORD})\"[ \t]++value=\")(?P<value>[^\"\n]++)\""
)
# <fooToken>value</fooToken> and the value alone on the next line.
_XML_ELEMENT: Final = re.compile(
    rf"(?P<head><[A-Za-z0-9_.-]*?(?ai:{_SECRET_WORD})>[ \t]*+\n?[ \t]*+)"
    r"(?P<value>[^<\s]++)"
)
# ``word token``/``word secret`` followed by a long value: "telegram bot: <x>" is rare,
# but "slack token - 'xoxb…'" and "API Key: sk-…" are common in logs.
_LOOSE_NAME: Final = re.compile(
    rf"(?<![A-Za-z0-9])(?P<head>(?ai:{_SECRET_WORD}|bot)s?[ \t]*+[:=-][ \t]*+['\"]?)"
    r"(?P<value>(?=[A-Za-z_\-+/=.:~]{0,40}[0-9])[A-Za-z0-9_\-+/=.:~]{16,}+)"
)

# ---- long random-looking tokens ---------------------------------------------------------
# (The shortest vendor token is a 3-character prefix and 12 more: 15.)
_LONG_RUN: Final = re.compile(r"[A-Za-z0-9+/_\-=.~%]{14,}+")
_CANDIDATE: Final = re.compile(r"(?<![A-Za-z0-9+/_\-=.~%])[A-Za-z0-9+/_\-~%]{32,}+={0,2}")

# Every match of a needle-gated pattern contains one of these (in ASCII lower case).
_NEEDLES: Final = (
    "://",
    "authorization",
    *("sk-", "eyj", "flyv1"),
    *("token", "secret", "key", "pass", "pw", "cred", "auth", "bot", "sonar"),
    *("-u", "--user", "xox", "hooks", "webhook", "bundle_"),
)
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# Names that hold a key's name, a file or an id, not a secret.
_NOT_SECRET_NAME: Final = re.compile(
    r"(?ai)(?:^|[_.\-])?(?:primary|foreign|public|pub|sort|partition|schema|sequence|bucket"
    r"|cache|hash|index|lookup|csrf|xsrf|idempotency|unique|shortcut|keyboard|hot|api_key_"
    r"|monkey|turkey|hockey|donkey|jockey|bypass|compass|surpass|keypass)[A-Za-z0-9_.-]*$"
    r"|^(?:key|bucket_key|sort_key)$"
)
_PLACEHOLDER: Final = re.compile(
    r"""(?x)^(?:
        \$[{(A-Za-z_]              # $VAR, ${VAR}, $(cmd)
      | \{\{ | <[^>]*>?$ | %[sd(]  # templates, <placeholder>, printf
      | \[REDACTED\]
      | (?i:none|null|nil|true|false|undefined|changeme|redacted|example|your[_-].*|insert.*)$
      | [A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\)?)?[;,)]*$  # a.b.c
      | [A-Za-z_][A-Za-z0-9_]*\(   # a call
      | os\.environ | process\.env | getenv
    )"""
)


_DUMMY: Final = re.compile(
    r"(?i:example|fake|dummy|invalid|sample|placeholder|your_|_here|hello|notreal|changeme"
    r"|redacted|wrong|notapass|not_long|tooshort)"
    # five of one character in a row: ``xxxxx``, ``00000``, ``*****``
    r"|(.)\1{4}"
)
_IDENTIFIER: Final = re.compile(r"[a-z]+(?:[A-Z][a-z]+)*+|[a-z]+(?:_[a-z]+)++")


def _is_dummy(value: str) -> bool:
    """A documentation value or a near miss written to test a scanner, not a credential:
    ``EXAMPLE``, ``xxxxx``, ``fake``, or a plain identifier (``requiredTypesForDisplay``)."""
    return _DUMMY.search(value) is not None


def _is_placeholder(value: str) -> bool:
    """A value that is plainly not a secret: empty, a template, a reference to code, or
    one character repeated (``xxxx``, ``****``, ``....``)."""
    inner = value.strip("\"'`@\\ \t;,")
    if len(inner) < 3:
        return True
    if _PLACEHOLDER.match(inner) or _is_dummy(inner):
        return True
    most = max(inner.count(c) for c in set(inner))
    return most >= 0.6 * len(inner)


def _looks_random(token: str) -> bool:
    """At least 32 characters mixing upper case, lower case and digits, with no run of
    lower-case letters long enough to be a word of a path or an identifier. Pure hex and
    UUIDs (git object names, digests, request ids) are left to the reader."""
    core = token.strip("=")
    if len(core) < 32:
        return False
    if not (any(c.isupper() for c in core) and any(c.islower() for c in core)):
        return False
    digits = sum(c.isdigit() for c in core)
    if digits < 2:
        return False
    # identifiers and paths: long lower-case words or many separators
    if core.count("/") > 3 or core.count("-") > 4 or core.count("_") > 4:
        return False
    run = longest = 0
    for c in core:
        run = run + 1 if c.islower() else 0
        longest = max(longest, run)
    return longest <= 12


def _redact_pem(text: str) -> str:
    """Replace each private-key block with REDACTED. A BEGIN with no END runs to the end
    of the text (a head cut inside the block); an END with no BEGIN runs from the start of
    the text, or from the previous block (a tail cut inside the block)."""
    if "PRIVATE" not in text:  # the common case costs one substring search
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


def _remember(found: set[str], value: str) -> None:
    """Note a redacted value, so its other occurrences (where nothing tells it is a
    secret) go too."""
    inner = value.strip("\"'`@\\")
    if len(inner) >= 8:
        found.add(inner)


def _head_value(found: set[str], match: re.Match[str]) -> str:
    """Keep the head, redact the value unless it is a placeholder."""
    value = match.group("value")
    if _is_placeholder(value):
        return match.group(0)
    _remember(found, value)
    return (
        match.group(0)[: match.start("value") - match.start()]
        + REDACTED
        + ("@" if match.group(0).endswith("@") and not value.endswith("@") else "")
        + ('"' if match.re is _XML_KEY_VALUE else "")
    )


def _auth_header(found: set[str], match: re.Match[str]) -> str:
    value = match.group("value")
    if _is_placeholder(value) or value.startswith(("$", "<", "{", "*", "...")):
        return match.group(0)
    _remember(found, value)
    return match.group("head") + REDACTED


def _secret_name(name: str) -> bool:
    """``db_password``, ``apiKey2``, ``password_secure`` — not ``key_id``, ``TokenFile``."""
    if name.lower().endswith("authorization"):  # the header rule's: its scheme word stays
        return False
    return _BUNDLER_HOST.search(name) is not None or not (
        _QUALIFIER.search(name) or _NOT_SECRET_NAME.search(name)
    )


def _quoted_literal(found: set[str], match: re.Match[str]) -> str:
    """A quoted literal next to a secret name (a comparison, a call): the literal goes,
    quotes kept."""
    name = match.group("name") or match.group("name2")
    key = "value" if match.group("value") is not None else "value2"
    value = match.group(key)
    if not _secret_name(name) or _is_placeholder(value):
        return match.group(0)
    _remember(found, value)
    start, end = match.start(key) - match.start(), match.end(key) - match.start()
    whole = match.group(0)
    return whole[:start] + value[0] + REDACTED + value[-1] + whole[end:]


def _assignment(found: set[str], match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if not _secret_name(name) or _is_placeholder(value):
        return match.group(0)
    _remember(found, value)
    # Keep the quotes so redacted JSON and shell lines still parse.
    if value.startswith('\\"'):
        quote = '\\"'
    else:
        quote = value[0] if value[0] in "\"'`" else ""
    closing = quote if quote and len(value) > len(quote) and value.endswith(quote) else ""
    head = match.group(0)[: match.start("value") - match.start()]
    return head + quote + REDACTED + closing


def _random_token(found: set[str], match: re.Match[str]) -> str:
    token = match.group(0)
    if not _looks_random(token) or _is_dummy(token):
        return token
    # Not remembered: the same rule finds every other occurrence by itself.
    return REDACTED


def _token(found: set[str], match: re.Match[str]) -> str:
    token = match.group(0)
    body = token[_prefix_length(token) :]
    # A vendor prefix is strong evidence: only a plain identifier after it (``hf_`` +
    # ``requiredTypesForDisplay``) is let through, placeholders are not (``xxxx`` in a
    # real file is as often a half-edited real key).
    if _IDENTIFIER.fullmatch(body) and len(set(body)) > 4:
        return token
    # A sentence's full stop is not part of the key.
    bare = token.rstrip(".")
    return REDACTED + token[len(bare) :]


def _prefix_length(token: str) -> int:
    for prefix in _BY_LENGTH:
        if token.startswith(prefix):
            return len(prefix)
    return 0


_Rewrite = Callable[[set[str], re.Match[str]], str]
_LINE_RULES: Final[tuple[tuple[re.Pattern[str], _Rewrite], ...]] = (
    (_TOKEN, _token),
    (_URL_PASSWORD, _head_value),
    (_USER_FLAG, _head_value),
    (_SECRET_FLAG, _head_value),
    (_AUTH_HEADER, _auth_header),
    (_XML_KEY_VALUE, _head_value),
    (_XML_ELEMENT, _head_value),
    (_COMPARISON, _quoted_literal),
    (_CALL_ARG, _quoted_literal),
    (_ASSIGNMENT, _assignment),
    (_LOOSE_NAME, _head_value),
    (_CANDIDATE, _random_token),
)


# Rules that need no keyword: a line without one is only checked for token shapes.
_SHAPE_RULES: Final = (_LINE_RULES[0], _LINE_RULES[-1])


def _redact_lines(
    text: str,
    found: set[str] | None = None,
    rules: tuple[tuple[re.Pattern[str], _Rewrite], ...] = _LINE_RULES,
) -> str:
    """The line rules, in order. Correct on any text; ``redact`` hands it only the lines
    that could match. Each value redacted is added to ``found``."""
    found = set() if found is None else found
    for pattern, rewrite in rules:
        text = pattern.sub(partial(rewrite, found), text)
    return text


def _lower_same_length(text: str) -> str:
    """A lower-cased copy whose indices are those of ``text``. ``str.lower`` is fast and
    lowers ASCII exactly; when it changes the length (``'İ'`` becomes two characters),
    lower ASCII only."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _line_span(text: str, at: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, len(text) if end < 0 else end


def _candidate_lines(text: str) -> list[tuple[int, int, bool]]:
    """Sorted, disjoint (start, end, keyword) spans of whole lines that contain a needle
    (``keyword``: every rule may match there; the next line too, a value may stand there)
    or a run of 14+ token characters (only the shape rules may). Linear: each needle
    visits each line at most once, the run pattern is one pass."""
    lowered = _lower_same_length(text)
    spans: list[tuple[int, int, bool]] = []
    for needle in _NEEDLES:
        at = lowered.find(needle)
        while at >= 0:
            start, end = _line_span(lowered, at)
            # the next line too: ``<token>\n  value``
            after = _line_span(lowered, end + 1)[1] if end < len(text) else end
            spans.append((start, after, True))
            at = lowered.find(needle, end)
    for run in _LONG_RUN.finditer(text):
        start, end = _line_span(text, run.start())
        spans.append((start, end, False))
    spans.sort()
    merged: list[tuple[int, int, bool]] = []
    for start, end, keyword in spans:
        # Overlapping, or the next line of the same kind: one span. (A keyword span is
        # not grown over the shape-only lines around it: they need fewer rules.)
        if merged and (
            start <= merged[-1][1] or (start == merged[-1][1] + 1 and keyword == merged[-1][2])
        ):
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2] or keyword)
        else:
            merged.append((start, end, keyword))
    return merged


def _propagate(text: str, found: set[str]) -> str:
    """A value once known to be a secret goes wherever else it appears (longest first, so
    a value containing another is replaced whole)."""
    values = sorted((v for v in found if v != REDACTED), key=len, reverse=True)
    if not values:
        return text
    # One pass for all of them (an alternation tries the longest first).
    return re.sub("|".join(map(re.escape, values)), REDACTED, text)


def _redact_unfiltered(text: str) -> str:
    """What ``redact`` computes, without the line prefilter (tests compare the two)."""
    found: set[str] = set()
    return _propagate(_redact_lines(_redact_pem(text), found), found)


def redact(text: str) -> str:
    """``text`` with every secret this module recognises replaced by ``[REDACTED]``.

    Pure, linear in ``len(text)``, and idempotent (``redact(redact(t)) == redact(t)``).
    """
    text = _redact_pem(text)
    found: set[str] = set()
    # REDACTED is no needle and no long run, so the lines to look at do not change.
    spans = _candidate_lines(text)
    parts: list[str] = []
    position = 0
    for start, end, keyword in spans:
        parts.append(text[position:start])
        rules = _LINE_RULES if keyword else _SHAPE_RULES
        parts.append(_redact_lines(text[start:end], found, rules))
        position = end
    parts.append(text[position:])
    text = "".join(parts)
    return _propagate(text, found)


def redact_bytes(data: bytes) -> str:
    """Decode as UTF-8 (undecodable bytes become U+FFFD, never an exception), then redact."""
    return redact(data.decode("utf-8", errors="replace"))


# ---- cut edges --------------------------------------------------------------------------


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
    return "".join(
        " " if (category := unicodedata.category(c)) == "Zs" else "" if category == "Cf" else c
        for c in text
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
