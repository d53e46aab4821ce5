"""Token shapes: values that are secrets on their own, wherever they stand.

Vendor-prefixed keys (Anthropic, OpenAI, GitHub, GitLab, Slack, Stripe, AWS, Google
``AIza``, Hugging Face, npm, PyPI, SendGrid, 1Password, Docker Hub, Cloudflare, and some
eighty more), Slack configuration tokens, Discord bot tokens, JWTs; and the shapes told by
a character rare in ordinary text (Telegram bot tokens, Slack/Teams/Discord webhooks,
Mailchimp, Facebook app tokens, Terraform Cloud), which run with the name rules.

A prefix that is also the start of common words (``pat``, ``test_``, ``SK``, ``key-`` ...)
counts only before a body that is not words: ``pattern-arrows-0.0.2``, ``patch-2.8-1.fc43``
and ``test_time_fall_type2`` are names. UUIDs are kept after a vendor prefix too
(``AC8E5E63-85C7-...`` is a simulator's id, not a Twilio key).

Recall before over-redaction: other scanners' test data counts as "not a secret" many
values that are real keys in form — a vendor's key with the wrong length or checksum for
*that* scanner, a known public key, a half-edited key (``npm_hK0F...?Kp6b...``). They are
redacted here: a key one character off its format in a log is as likely a real key
mangled as a test string, and the cost of redacting one is a word the model does not see.

Fast: the vendor prefixes are compiled as a trie (``_trie``), so a position costs a few
character tests, not one per prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from orchestrator.redaction.placeholders import REDACTED, low_information
from orchestrator.redaction.words import wordy

_Trie = dict[str, "_Trie"]


def _trie(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words``, longest first, as a trie: the
    engine tests a character per level instead of trying every word in turn."""
    root: _Trie = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def emit(node: _Trie) -> str:
        branches = [re.escape(c) + emit(node[c]) for c in sorted(k for k in node if k)]
        if not branches:
            return ""
        body = "(?:" + "|".join(branches) + ")"
        return body + "?" if "" in node else body

    return emit(root)


# ---- token shapes (each is a secret on its own, whatever surrounds it) ------------------
_TC = r"A-Za-z0-9_\-"  # token characters
# Vendor prefixes followed by at least this many token characters. Case-sensitive: the
# prefixes are distinctive in the case their vendors write them.
_VENDOR_PREFIXES: Final = (
    # source hosting, CI, package registries
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-"),
    *("glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glcbt-", "glffct-", "glsoat-"),
    *("GR1348941", "_gitlab_session=", "npm_", "pypi-", "rubygems_", "CLOJARS_"),
    # (dckr_oat_: shape after kingfisher's dockerhub-organization-access-token rule,
    # Apache-2.0)
    *(
        "CCIPAT_",
        "dckr_pat_",
        "dckr_oat_",
        "ATATT",
        "ATCTT",
        "ATBB",
        "rdme_",
        "sqp_",
        "sqa_",
        "squ_",
    ),
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
    # (sk_prod_/rk_prod_: shape after kingfisher's stripe rules, Apache-2.0)
    *("sk_live_", "rk_live_", "sk_test_", "rk_test_", "sk_prod_", "rk_prod_", "pk_live_"),
    *("sq0atp-", "sq0csp-"),
    *("EAAA", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxo-", "xoxe-", "xapp-", "key-"),
    *("pubkey-", "duffel_test_", "duffel_live_", "live_", "test_pub_", "test_", "AKCp"),
    *("cmVmd", "fio-u-", "s-s4t2ud-", "s-s4t2af-", "SK", "AC", "sc_"),
    # AWS AppSync API keys
    "da2-",
)
# Prefixes that are common word starts: they need a longer body with digits in it.
_WEAK_PREFIXES: Final = frozenset(
    {"pat", "secret_", "live_", "test_", "key-", "API-", "SK", "AC", "master-", "EAA", "sc_"}
)
_STRONG: Final = sorted(p for p in _VENDOR_PREFIXES if p not in _WEAK_PREFIXES)
_WEAK: Final = sorted(_WEAK_PREFIXES)
_BY_LENGTH: Final = sorted((*_VENDOR_PREFIXES, "A3-"), key=len, reverse=True)
TOKEN: Final = re.compile(
    # (A token starts a run: not inside a word. It may follow a '/' or a '+', even inside
    # a base64 blob: ``host/v1/sk-ant-...`` and ``q=a+ghp_...`` are keys, and a blob's
    # chance vendor prefix costs a few characters of it. Every match starts with seven
    # characters of its alphabet: a shorter word costs the engine a bounded look, not the
    # whole alternation.)
    rf"(?<![{_TC}.])(?=[{_TC}.+/=~]{{7}}|FlyV1 )(?:"
    # Anthropic: distinctive enough that any tail (even a cut one) goes.
    r"sk-ant-[A-Za-z0-9_-]*+"
    rf"|{_trie(_STRONG)}[{_TC}.+/=~]{{12,}}+"
    # (not a path component: ``/tmp/test_a_case_name0/x`` is no Lob key)
    rf"|(?<!/){_trie(_WEAK)}(?=[{_TC}.]{{0,60}}[0-9])[{_TC}.+=]{{16,}}+(?!/)"
    # JWT: base64url JSON header and payload both start with ``{"`` = ``eyJ``.
    # (Real headers and payloads run to 20+ characters: ``eyJa.eyJb.c`` is a pattern's
    # test string.)
    r"|eyJ[A-Za-z0-9_-]{7}[A-Za-z0-9_-]*+\.eyJ[A-Za-z0-9_-]{7}[A-Za-z0-9_-]*+\.[A-Za-z0-9_-]*+"
    # Hashicorp service tokens; 1Password secret keys (A3-XXXXXX-XXXXXXXXXXX-XXXXX-...).
    r"|s\.(?=[a-zA-Z]{0,23}[0-9])(?=[a-z0-9]{0,23}[A-Z])[A-Za-z0-9]{24}(?![A-Za-z0-9])"
    r"|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})(?:-[A-Z0-9]{5}){3}"
    # JFrog (AKC…, AP[0-9A-F]…), Discord bot tokens, Azure AD client secrets (…8Q~…),
    # Twilio.
    r"|(?:AKC|AP[0-9A-F])[A-Za-z0-9]{10,}+"
    # Slack configuration tokens (shape after kingfisher's slack-config-access-token and
    # slack-config-refresh-token rules, Apache-2.0).
    r"|[xX][oO][xX][eE]\.[xX][oO][xX][bBpP]-[0-9]-[A-Za-z0-9]{163,166}(?![A-Za-z0-9])"
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}+"
    r"|[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}+"
    r"|(?:SK|AC)[0-9a-fx]{32}(?![A-Za-z0-9])"
    r")"
)
# Token shapes recognised by a character that is rare in ordinary text (':AA', '-us',
# '|', '.atlasv1.', a webhook host): they run with the name rules, on the lines that
# have it. Telegram bot tokens, Slack/Teams/Discord webhooks, Mailchimp (…-us12),
# Facebook app tokens (id|secret), Terraform Cloud.
RARE_TOKEN: Final = re.compile(
    rf"(?<![{_TC}.])(?:"
    r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}"
    # (a host name is any case: ``Contoso.webhook.office.com`` posts to the same channel)
    r"|(?:https?://)?(?:(?i:hooks\.slack\.com)/(?:services|workflows|triggers)"
    r"|(?i:discord(?:app)?\.com)/api/webhooks|(?i:[a-z0-9-]+\.webhook\.office\.com)/webhookb2)/\S++"
    r"|[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"
    r"|[0-9]{15,16}\|[A-Za-z0-9_-]{27}(?![A-Za-z0-9_-])"
    r"|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}+"
    r")"
)


# camelCase, snake_case, kebab-case, SCREAMING_CASE: words, no digit.
_IDENTIFIER: Final = re.compile(
    r"[a-z]+(?:[A-Z][a-z]+)*+|[a-z]+(?:_[a-z]+)++|[A-Za-z]{2,12}(?:[-_][A-Za-z]{2,12})++"
)


def rewrite_token(found: set[str], match: re.Match[str]) -> str:
    """A token shape's match, redacted unless it is a path's part, a word or a placeholder
    after the prefix, a file's name or a UUID. (``found`` is the name rules' signature: a
    token shape finds its other occurrences itself.)"""
    token = match.group(0)
    if "/" in token and match.string[match.start() - 1 : match.start()] == "/":
        return token  # a path component: ``github.com/xoxa-nyc/repo/blob/...``
    if token.startswith("sk-ant-"):
        return REDACTED  # distinctive enough that any tail goes, placeholder-looking or cut
    body = token[_prefix_length(token) :]
    # A vendor prefix is strong evidence: only a plain identifier after it (``hf_`` +
    # ``requiredTypesForDisplay``) or a placeholder (``ghp_xxxx``) is let through.
    if _IDENTIFIER.fullmatch(body) and len(set(body)) > 4:
        return token
    if _IDENTIFIER.fullmatch(body.partition("=")[0]) and "=" in body:
        return token  # a variable set: ``export npm_config_build_from_source=true``
    if low_information(body) or _FILE_NAME.search(token):
        return token  # (``api_org_96726c78_4ae3.xml`` is a file)
    if _UUID.fullmatch(token.rstrip(".")):
        return token  # an id in either case (a simulator's ``ACEC701E-9AAF-...``)
    prefix = token[: len(token) - len(body)]
    if prefix in _WEAK_PREFIXES and _starts_a_word(prefix, body):
        return token
    # A sentence's full stop is not part of the key.
    bare = token.rstrip(".")
    return REDACTED + token[len(bare) :]


_FILE_NAME: Final = re.compile(
    r"\.(?:xml|json|ya?ml|txt|py|js|ts|go|rb|java|html?|md|cfg|ini|toml|lock|log|csv|png|svg)$"
)


_UUID: Final = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
)
_LEADING_LETTERS: Final = re.compile(r"[A-Za-z]*")
_WEAK_BODY_SEPARATORS: Final = re.compile(r"[-_.]+")


def _starts_a_word(prefix: str, body: str) -> bool:
    """A weak prefix (``pat``, ``test_``, ``SK`` ...: common word starts) that is the start
    of a word or an identifier, not of a key: the prefix and the letters after it are a
    word (``pattern-arrows-0.0.2``, ``patch-2.8-1.fc43``), or every part of the body is a
    word with at most two runs of digits (``test_time_fall_type2_dtsec``,
    ``paths0-conf_rules0``). A key's body is one random run (a hex digest counts as one
    here: ``test_23fe52...`` is a Lob key)."""
    if prefix[-1].isalpha():
        letters = _LEADING_LETTERS.match(body)
        head = prefix + (letters.group(0) if letters else "")
        rest = body[len(head) - len(prefix) :]
        if len(head) >= 4 and (not rest or rest[0] in "-_.") and _plain_word(head):
            return True
    return all(_plain_word(part) for part in _WEAK_BODY_SEPARATORS.split(body) if part)


# One word in one case (``pattern``, ``True``, ``SKIPPED``), lower case with digits
# (``rules0``, ``fc43``, ``filename2modelname``), or a number. No camelCase: a random
# value's letters read as camelCase humps too often (``raSzvuXZJxJCLO``).
_PLAIN_WORD: Final = re.compile(r"[a-z0-9]+|[A-Z][a-z]+[0-9]*|[A-Z]+[0-9]*")


def _plain_word(part: str) -> bool:
    return _PLAIN_WORD.fullmatch(part) is not None and wordy(part, hex_ok=False)


def _prefix_length(token: str) -> int:
    for prefix in _BY_LENGTH:
        if token.startswith(prefix):
            return len(prefix)
    return 0
