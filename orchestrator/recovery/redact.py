"""Secret redaction for everything that leaves the process (the context bundle above all).

``redact`` replaces credentials with ``[REDACTED]``:

* token shapes that are secrets on their own, wherever they stand: vendor-prefixed keys
  (Anthropic, OpenAI, GitHub, GitLab, Slack, Stripe, AWS, Google ``AIza``, Hugging Face,
  npm, PyPI, SendGrid, 1Password, Docker Hub, Cloudflare, and some eighty more), Slack
  configuration tokens, Discord bot tokens, JWTs, PEM private-key blocks, the ``data:``
  values of a Kubernetes ``Secret`` manifest;
* keys told by their vendor's name, whatever the setting is called: Cloudflare's global
  key, MessageBird keys, Sumo Logic access ids, and an AWS secret access key after any
  name with secret/access/key/token in it and any separator (``,``, ``||``, ``>`` too);
* passwords in URLs (``scheme://user:password@host``, a password holding ``@`` whole),
  signed-URL signatures (``sig=``), and ``-u user:password``;
* ``Authorization`` header values (any scheme word: ``Bearer``, ``Api-Token`` ...);
* the value of a setting whose name says it is a secret: ``NAME=value`` and every other
  assignment spelling (``:=``, ``::=``, ``?=``, ``+=``, ``.=``, ``=>``, ``: ``, JSON,
  ``env["NAME"] = value``, ``set("NAME", "value")``, ``--token value``), an XML element
  or ``key="..Password" value="..."`` pair, and a value alone on the next line of
  ``<nameToken>``. The name is kept, so the model still learns *which* setting was
  involved;
* long random-looking tokens (``_looks_random``).

Entropy. A random value without a prefix or a telling name cannot be told from noise by
its shape alone, so the last rule is a bet, stated here: a run of at least 32 characters
of the base64/url alphabet that mixes upper case, lower case and digits, has no
lower-case run longer than 12 (a word of a path or an identifier) and at most one
separator per 12 characters, is taken for a secret — unless every part of it (split at
``-_./+~%``) reads as a word of an identifier, a number or a hex digest
(``rules0-exclude_rules0-True``, ``Win32_Devices_BiometricFramework``,
``cache-linux-<sha256>--rvm-default``): a parametrised test id, a symbol, a path. A run
that begins with plain words (``/opt/worker/cache/IZ1x...``, ``taskcluster-Qh0al...``: a
path, an id named by words) is judged part by part, each part as if it stood alone. That
trades a little over-redaction (base64 blobs, some build ids) for recall in logs; where a
secret and a diagnosis conflict, the secret wins. Pure hex (git object names, digests)
and UUIDs (in either case, after a vendor prefix too: ``AC8E5E63-85C7-...`` is a
simulator's id, not a Twilio key) are kept: a diagnosis needs them, and a hex key without
a telling name is the price. Shorter values are judged only by their name or prefix. A
prefix that is also the start of common words (``pat``, ``test_``, ``SK``, ``key-`` ...)
counts only before a body that is not words: ``pattern-arrows-0.0.2``, ``patch-2.8-1.fc43``
and ``test_time_fall_type2`` are names. Public material is kept
even when random: the value of a setting named public (``public_key``, ``csrf-token``,
``integrity``), PEM public keys and certificates, a JWT header alone, ``sha512-``
integrity digests, and ciphertext (SOPS ``ENC[...]``, Vault ``vault:v1:``).

A value that carries no information is kept, whatever its name or prefix says: a
placeholder or a reference a tool fills in (``${VAR}``, ``${{ secrets.X }}``,
``$.Values.x``, ``{{ .x }}``, ``<token>``, ``%VAR%``, ``@VAR@``, ``{Name}``,
``[PASSWORD]``), a format argument (``%s``, ``%1$s``, ``{0}``), a reference to code
(``var.db_password``, ``db_password_from_vault``, ``currentSecret``, ``new Foo(...)``),
a value that names its own field (``password: PASSWORD``, ``-u user:pass``), an
environment variable's name (``"apiKeySource": "ANTHROPIC_API_KEY"``: where the key is),
a count under a plural name (``"output_tokens": 312``, in every engine's usage), an empty
string or punctuation alone, ``x`` in four characters of five after a vendor prefix
(``ghp_xxxx``, ``glpat-XXXX-XXXX``): a key with its secret part overwritten leaks
nothing. So is a value that is
a file's place (``PWD=/builds/worker``, ``SSH_AUTH_SOCK: /tmp/...``, ``gpgkey:
file:///etc/pki/...``: where a secret is, never the secret), a measurement (``35.89``,
``100%``: a PIN has no point) or a command's options (``pass '-p crate --test ref'``).
Names that hold a key's *name* rather than the key (``primaryKey``, ``key_id``,
``TokenFile``, ``keyword``) are not secret names; a bare ``key``/``key1`` (a map's key as
often as a credential) counts only with a credential-like value (16+ characters, letters
and digits, a run of 12 of them), and so does a name that holds a secret word without
saying its value is a secret (``_weak_secret_name``): the word inside another
(``keycode``, ``authenticator``, ``sf-cauth``), a key of no credential's kind
(``name_key``, ``gpgkey``, ``fedora-gpg-keys-0``), a file's name (``devtoken.obj``), a
camelCase identifier that ends in another word (``AddAuthTokenToUsers: migrating``, a
schema migration). A test runner's ``PASS: test_name`` is no name at all. A secret word
counts in a name where it ends a word of it: ``accesstoken`` and ``dbPassword`` are secret
names, and ``auth`` only as a word of its own (``oauth``, ``sslauth`` are not).

Real CI logs, reviewed to hold no credential (``../shared/data/ci-logs``), are the measure
of what this costs: ``bench/redaction_negatives.py --logs`` counts the lines it alters and
the rule behind each; ``tests/recovery/test_redaction_real_logs.py`` holds it to at most
0.5 % of them (issue 25). A value found under a secret name goes wherever else it appears
in the text, except a value of words alone (``migrating``): where it stands under the name
it goes, but elsewhere it is as likely the word itself, and one name taken for a secret's
would take that word out of a whole log.

Recall before over-redaction. Other scanners' test data counts as "not a secret" many
values that are real keys in form: a vendor's key with the wrong length or checksum for
*that* scanner, a known public key, a half-edited key (``npm_hK0F...?Kp6b...``), a
password under a ``password`` name that a scanner skips for the file type. They are
redacted here: a key one character off its format in a log is as likely a real key
mangled as a test string, and the cost of redacting one is a word the model does not see.
Two filters other scanners use were measured on that data and left out, because each
let true positives through: obvious sequences (``123456789``, ``abcdefghij``,
``abcd1234abcd1234``: test suites write keys so) and a minimum entropy per value
(``abc``, ``test`` under a password name are passwords here).

Linear time on any input: Python's ``re`` backtracks, so every pattern either starts only
at the beginning of a run of its characters (a negative lookbehind) and consumes that run
possessively (``++``, ``*+``: Python 3.11), or has a bounded length. ``tests/recovery/
test_redact.py`` pins this on 1 MB inputs.

Fast on ordinary text: the token shapes and the random-token rule are one pass each over
the whole text (the vendor prefixes compiled as a trie, so a position costs a few
character tests, not one per prefix). The name rules need one of a few ASCII words
(``_KEYWORD``, searched in a lower-cased copy); only the lines that have one are handed
to them, batched into one string per rule, so each rule is one regular-expression pass
over those lines.
"""

from __future__ import annotations

import base64
import bisect
import functools
import re
import string
import unicodedata
from collections.abc import Callable, Iterable
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


# ---- PEM private keys ------------------------------------------------------------------
# Markers only; the block between them is found by a linear scan (``_redact_pem``), which
# also handles a block cut at either end — the excerpts we build are cut at arbitrary bytes.
_PEM_MARKER: Final = re.compile(
    r"-----(BEGIN|END)[ ?]?[A-Z0-9 ?]{0,40}PRIVATE[ ?]KEY(?:[ ?]BLOCK)?-----",
)
# Public keys, certificates, and PGP messages and signatures (a message is ciphertext:
# the key that opens it is elsewhere, as with SOPS values): their random-looking lines
# are kept (``_public_blocks``).
_PUBLIC_BEGIN: Final = re.compile(
    r"-----BEGIN (?:[A-Z0-9 ]{0,20}PUBLIC KEY(?: BLOCK)?|(?:TRUSTED |X509 )?CERTIFICATE"
    r"(?: REQUEST)?|PGP (?:MESSAGE|SIGNATURE|SIGNED MESSAGE))-----"
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
_TOKEN: Final = re.compile(
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
_RARE_TOKEN: Final = re.compile(
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

# ---- scheme://user:password@host, -u user:password, ?sig=... ---------------------------
# The lookbehind keeps starts to the beginning of a scheme (a diff's '+' marker may stand
# before it: '+' is not in the lookbehind); the user part cannot contain '/', so no two
# candidate matches scan the same text.
_URL_PASSWORD: Final = re.compile(
    r"(?<![A-Za-z0-9.-])(?P<head>[A-Za-z][A-Za-z0-9+.-]*+://[^\s/:@'\"]*+:)"
    # (a password may hold '@': the last one of the run ends it; the run has no '/', so
    # the backtracking stays within it)
    r"(?P<value>[^\s/'\"]+)@"
)
# The signature of a signed URL (Azure SAS, S3/GCS presigned) grants what it signs.
_URL_SIGNATURE: Final = re.compile(
    r"(?P<head>[?&;](?ai:sig|signature|x-amz-signature|x-goog-signature)=)"
    r"(?P<value>[^&#\s\"'<>]++)"
)
# curl -u user:password, --user "user:password" (the whole pair goes: either half may be
# the secret, ``-u ":password"`` and ``-u "apikey:"`` are both common).
_USER_FLAG: Final = re.compile(
    r"(?<![\w-])(?P<head>(?:-u|--user)[ \t=]++)"
    r"(?P<value>\"[^\"\n:]*+\":\"[^\"\n]*+\""
    r"|\"[^\"\n]*:[^\"\n]*+\"(?::\"[^\"\n]*+\")?|'[^'\n]*:[^'\n]*+'"
    # (the user part holds no quote: ``after `-u NORC`: 150 ms`` closes a code span)
    r"|[^\s'\"`:]*+:(?:'[^'\n]*+'|\"[^\"\n]*+\"|[^\s]*+))"
)
# --token value, --password=value, --api-key value, --github-token value: the secret word is
# the flag's last word (``-CETCOMPAT lib`` holds no ``pat``, ``--token-file`` names a file)
_SECRET_FLAG: Final = re.compile(
    r"(?<![\w-])(?P<head>--?(?:[A-Za-z0-9]++-)*?(?ai:token|secret|passw(?:or)?d|api-?key|pat)"
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
# (``pass`` but not ``passed``/``passing``/``passes``: test reports; ``auth`` but not
# ``author``.)
# (written as a trie: a name character costs a test or two, not one per word)
_SECRET_WORD = (
    r"(?:token|s(?:ecrete?|onar[._]login)|key|p(?:ass(?:w(?:or)?d|(?!ed|ing|es))|wd|w)"
    r"|cred(?:s|entials?)|a(?:pikey|uth(?!or)))"
)


def _any_case(pattern: str) -> str:
    """``pattern`` with each ASCII letter made a ``[xX]`` class: the engine's ignore-case
    mode is several times slower on long texts, and ASCII case is all the keywords need
    (a secret word spelt with the long s, U+017F, is no secret word)."""
    return re.sub(r"[A-Za-z]", lambda m: f"[{m.group().lower()}{m.group().upper()}]", pattern)


_SECRET_WORD_ANY_CASE: Final = _any_case(_SECRET_WORD)
_ASSIGNMENT: Final = re.compile(
    # A name starts where a run of name characters starts (linear: one attempt per run) ...
    rf"(?<![{_NAME_CHAR}$])\$?"
    rf"(?=[{_NAME_CHAR}]*?{_SECRET_WORD_ANY_CASE}|BUNDLE_)"
    rf"(?P<name>[{_NAME_CHAR}]++)"
    # separators: = := ::= :::= ?= += .= => and ': ' (YAML, headers), '"name": ',
    # env["NAME"] = , name[25] =
    r"(?P<sep>(?:\\?[\"'`])?\]?[ \t]*+(?:\[[0-9]*\])?[ \t]*+"
    r"(?:[:?+.]{0,3}=(?![=~])>?|=>|:(?=[ \t\"'`])|:(?=\\?\"))[ \t]*+@?)"
    # A quoted value to its closing quote (escapes honoured), else everything up to
    # whitespace, ',' or ';' — or up to whitespace alone when that leaves fewer than three
    # characters (``A,.:-@*?!`` is one password).
    r"(?P<value>\\\"(?:[^\"\\\n]|\\[^\"\n])*+(?:\\\")?"
    r"|\"(?:[^\"\\\n]|\\.)*+\"?|'(?:[^'\\\n]|\\.)*+'?|`[^`\n]*+`?"
    r"|[^\s,;]{3}[^\s,;]*+|[^\s]++)"
)
# Keys known by a vendor's name before them, whatever the setting is called
# (``cloudflare: "<37 hex>"``, ``MessageBirdClientID = "<uuid>"``, ``SUMO_ACCESS_ID =
# su<12>``), and an AWS secret
# access key (40 characters of base64) after a name with secret/access/key/token in it,
# after any separator, including ``,`` (a call's argument), ``||`` (a default) and ``>``.
# (Shapes after kingfisher's cloudflare-global-api-key, messagebird, sumologic-access-id
# and aws-secret-access-key rules, Apache-2.0.)
_VENDOR_NAMED: Final = re.compile(
    # (the name's words are judged in ``_vendor_named``: a lookahead for them at every
    # name would cost every line with a keyword; the value's shape is rarer)
    rf"(?<![{_NAME_CHAR}])(?P<head>(?P<name>[{_NAME_CHAR}]++)"
    r"[\"'\]]?[ \t]*+(?:=>|\?=|:=|\|\||[=:,>])[ \t]*+[\"']?)"
    r"(?=[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=-])|[0-9a-f]{37}(?![0-9A-Za-z])"
    r"|[0-9A-Fa-f]{8}-|[A-Za-z0-9]{25}(?![0-9A-Za-z])|su[A-Za-z0-9]{12}(?![0-9A-Za-z]))"
    r"(?P<value>[A-Za-z0-9/+=-]++)(?![^\s\"',;)\]}])"
)
_SUMO_ACCESS_ID: Final = re.compile(r"su[A-Za-z0-9]{12}")
_HEX37: Final = re.compile(r"[0-9a-f]{37}")
_MESSAGEBIRD_KEY: Final = re.compile(
    r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}|[A-Za-z0-9]{25}"
)
_AWS_SECRET: Final = re.compile(
    r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])(?=[^0-9/+]*[0-9/+])[A-Za-z0-9/+=]{40}"
)
# The last word of a name that holds a key's name, a file or an id rather than a secret.
_QUALIFIER: Final = re.compile(
    r"(?ai)(?:^|[_.\-]|(?<=[a-z0-9]))(?:id|ids|name|names|file|files|path|dir|url|uri|length|len"
    r"|size|type|types|hash|event|selector|store|vault|pair|chars|str|pressed|count|format"
    r"|version|field|header|prefix|suffix|env|var|ref|arn|alias|label|index|mode|algorithm"
    r"|meshing|signatures?|enabled|expiry|expires|ttl|timeout|location|spec|policy|provider"
    r"|manager|service|endpoint|host|port|region|table|column|class|method|handler|factory"
    r"|generator|error|exception|warning|util|utils|helper|validator|template|secrets"
    r"|variable|results?|status)[0-9]*$"
)
# Bundler keeps a host's credentials in BUNDLE_<HOST>__<TLD>.
_BUNDLER_HOST: Final = re.compile(r"BUNDLE_[A-Z0-9_]+__[A-Z]{2,6}$")
# ``if (password == "literal")`` and ``"literal" != api_key``: a literal compared with a
# secret is the secret.
# (a lookahead finds the word, then the run is taken possessively: linear)
_NAME_WORD = rf"(?=[A-Za-z0-9_.]*?{_SECRET_WORD_ANY_CASE})[A-Za-z0-9_.]++"
_COMPARISON: Final = re.compile(
    rf"(?<![A-Za-z0-9_.])(?P<name>{_NAME_WORD})[ \t]*+[!=]==?[ \t]*+"
    r"(?P<value>\"[^\"\n]*+\"|'[^'\n]*+')"
    r"|(?P<value2>\"[^\"\n]*+\"|'[^'\n]*+')[ \t]*+[!=]==?[ \t]*+"
    rf"(?P<name2>{_NAME_WORD})"
)
# ``secret("literal")``, ``password "literal"``, ``secret.assign("literal", 17)``, and a
# name passed beside its value: ``setProperty("API_TOKEN", "literal")``.
_CALL_ARG: Final = re.compile(
    # (not after '/' or '-': ``github.com/org/basic_auth 'A library ...'`` is a path and
    # its title, ``mojo-auth.ex 'Auth for Elixir'`` a package)
    rf"(?<![A-Za-z0-9_./-])(?P<name>{_NAME_WORD})(?:\[[0-9]*\])?"
    r"(?:[ \t]++|\(|\.assign\()@?(?P<value>\"[^\"\n]*+\"|'[^'\n]*+')"
    rf"|\([ \t]*+[\"'](?P<name2>[{_NAME_CHAR}]*?{_SECRET_WORD_ANY_CASE}[{_NAME_CHAR}]*+)[\"']"
    r"[ \t]*+,[ \t]*+(?P<value2>\"[^\"\n]*+\"|'[^'\n]*+')"
)
# <add key="ClearTextPassword" value="..." />
_XML_KEY_VALUE: Final = re.compile(
    rf"(?P<head>key=\"[^\"\n]*?{_SECRET_WORD_ANY_CASE}\"[ \t]++value=\")(?P<value>[^\"\n]++)\""
)
# <fooToken>value</fooToken> and the value alone on the next line (to the next '<' or the
# end of the line: Jenkins writes ``<secret>{AQAAABAAA ...}</secret>``).
_XML_ELEMENT: Final = re.compile(
    rf"(?P<head><[A-Za-z0-9_.-]*?{_SECRET_WORD_ANY_CASE}>[ \t]*+\n?[ \t]*+)"
    r"(?P<value>[^<\s](?:[^<\n]*[^<\s])?)"
)
# ``word token``/``word secret`` followed by a long value: "telegram bot: <x>" is rare,
# but "slack token - 'xoxb…'" and "API Key: sk-…" are common in logs. (The compound
# name the word ends, ``csrf-token``, is judged in ``_loose_name``.)
# (a '-' separates only after a blank: ``wicket-auth-roles`` and ``RPM-GPG-KEY-fedora-43``
# are kebab-case words)
_LOOSE_NAME: Final = re.compile(
    rf"(?<![A-Za-z0-9])(?P<head>(?:{_SECRET_WORD_ANY_CASE}|[bB][oO][tT])s?"
    r"(?:[ \t]*+[:=]|[ \t]++-)[ \t]*+['\"]?)"
    r"(?P<value>(?=[A-Za-z_\-+/=.:~]{0,40}[0-9])[A-Za-z0-9_\-+/=.:~]{16,}+)"
)

# ---- Kubernetes Secret manifests ---------------------------------------------------------
# (each line may carry a diff's marker)
_K8S_SECRET_KIND: Final = re.compile(r"[+\-]?[ \t]*kind:[ \t]*[\"']?[sS]ecret[\"']?[ \t\r]*")
_K8S_DOCUMENT: Final = re.compile(r"[+\-]?---[ \t]*")
_K8S_DATA: Final = re.compile(r"[+\-]?(?P<indent>[ \t]*)(?:data|stringData):[ \t\r]*")
_K8S_ENTRY: Final = re.compile(
    r"(?P<head>[+\-]?(?P<indent>[ \t]*)[A-Za-z0-9_.\-]+:[ \t]+)(?P<value>\S[^\r]*)\r?"
)

# ---- long random-looking tokens ---------------------------------------------------------
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

# Every match of a name rule contains one of these (in ASCII lower case): the lines that
# have none skip the name rules.
_KEYWORD: Final = re.compile(
    # (a trie by first character: token secret sonar key pass(w) pw pat cred auth
    # authorization bot bundle_ -u --user -us<digit> :// :aa sig= signature= <digit>|
    # .atlasv1. webhook hooks.slack.com. A Mailchimp key's ``-us`` and a Facebook
    # token's ``|`` are taken with the digit beside them: a table's ``|`` and ``en-us``
    # are common in logs, and each line with a keyword is handed to every name rule.)
    r"(?:t(?:oken)|s(?:ecret|onar)|k(?:ey)|p(?:ass(?!ed|ing|es)|w|at[ \t=])|c(?:red|loudflare)"
    r"|a(?:uth(?!or)|uthorization)|b(?:ot|undle_)|-(?:u[ \t=]|-user|us[0-9])|:(?://|aa)"
    r"|sig=|signature=|\|(?<=[0-9]\|)|\.atlasv1\.|webhook|hooks\.slack\.com|message[ _.-]?bird|sumo)"
)
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# Names that hold a key's name, a file or an id, not a secret.
# (a word of the name: at its start, after a separator, or where camelCase starts one —
# ``bitbucket_api_token`` holds no bucket)
_NOT_SECRET_NAME: Final = re.compile(
    r"(?:^|(?<=[_.\-])|(?<=[a-z0-9])(?=[A-Z]))"
    + _any_case(
        "(?:primary|foreign|public|pub|sort|partition|schema|sequence|bucket"
        "|cache|hash|index|lookup|csrf|xsrf|idempotency|unique|shortcut|keyboard|hot|api_key_"
        "|monkey|turkey|hockey|donkey|jockey|bypass|compass|surpass|keypass|keyword|keystroke"
        "|authenticity|keyframe)"
    )
    + r"[A-Za-z0-9_.-]*$"
    + _any_case("|^(?:key|bucket_key|sort_key)$")
)
# A map's key as often as a credential: ``key``, ``keys``, ``key1``, ``keyN``, ``_key``.
_BARE_KEY: Final = re.compile(r"[_.\-]*[kK][eE][yY][sS]?(?:[0-9]*|[A-Z])")
_PLACEHOLDER: Final = re.compile(
    r"""(?x)^(?:
        \$\.?[{(A-Za-z_0-9]        # $VAR, ${VAR}, ${{ secrets.X }}, $(cmd), $1, $.Values.x
      | \{\{ | <[^>]*>?$ | %[sd(]  # templates, <placeholder>, printf
      | %[A-Za-z_][A-Za-z0-9_]*%$  # %VAR% (Windows, NuGet)
      | \{[0-9]*\}$ | %[0-9]*\$?[sd]$  # {0}, {}, %1$s: format arguments
      | \{[A-Za-z_][A-Za-z_.]*\}$  # {Name}
      | \[[A-Za-z_ ]*\]$           # [PASSWORD]
      | \[REDACTED\]
      | (?i:none|null|nil|true|false|undefined|changeme|redacted|example|your[_-].*|insert.*)$
      | (?:new|this|self|await|function|lambda)$  # code: the value is computed
      | ENC\[ | vault:v[0-9]+:    # ciphertext (SOPS, Vault transit): the key is elsewhere
      | [A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\)?)?[;,)]*$  # a.b.c
      | [A-Za-z_][A-Za-z0-9_]*\(   # a call
      | os\.environ | process\.env | getenv
    )"""
)
# A value that only names its field: ``-u username:password``, ``token: TOKEN``.
_FIELD_WORDS: Final = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "apikey", "key", "username"}
    | {"user", "accesstoken", "secretkey", "accesskey", "apitoken", "authtoken", "credentials"}
)


# (matched in a lower-cased copy: an ignore-case search is several times slower)
_DUMMY: Final = re.compile(
    r"example|fake|dummy|invalid|sample|placeholder|your_|_here|hello|notreal|changeme"
    r"|redacted|wrong|notapass|not_long|tooshort"
)
# Five or more of one character in a row: ``xxxxx``, ``00000``, ``*****``.
_REPEAT: Final = re.compile(r"(.)\1{4,}")
# camelCase, snake_case, kebab-case, SCREAMING_CASE: words, no digit.
_IDENTIFIER: Final = re.compile(
    r"[a-z]+(?:[A-Z][a-z]+)*+|[a-z]+(?:_[a-z]+)++|[A-Za-z]{2,12}(?:[-_][A-Za-z]{2,12})++"
)


def _is_dummy(value: str) -> bool:
    """A documentation value or a near miss written to test a scanner, not a credential:
    ``EXAMPLE``, ``fake``, or mostly one character repeated (``xxxxx``; a long random
    value that merely contains ``AAAAA`` is no dummy: Twitter bearer tokens start so)."""
    if _DUMMY.search(value.lower()) is not None:
        return True
    return _REPEAT.search(value) is not None and len(_REPEAT.sub("", value)) < 8


def _low_information(value: str) -> bool:
    """Letters and digits (separators aside) that are ``x`` four times in five: the
    placeholder letter of documentation and templates (``ghp_xxxx``, ``glpat-XXXX-XXXX``,
    ``glsa_XXXX..._AAAAAAAA``, ``tx_xxxx...``). Judged from eight characters on. Other repeated characters (``ghp_aaaa...``, ``AAAAAAAAAAAAAAAAAAAAAAn1
    aSw0...`` in Twitter's bearer tokens) and runs of consecutive characters
    (``abc123...``) are kept as secrets: test data, scanners' and ours, uses them for
    keys as often as for placeholders, and recall wins."""
    core = _fold(value)
    return len(core) >= 8 and core.count("x") >= 0.8 * len(core)


_NOT_ALNUM: Final = re.compile(r"[\W_]+")


def _fold(text: str) -> str:
    """Letters and digits only, lower case."""
    return _NOT_ALNUM.sub("", text.lower())


def _names_itself(value: str, name: str = "") -> bool:
    """``PASSWORD``, ``[token]``, ``ACCESS_TOKEN`` for ``access_token``: the value is the
    field's name, not its content."""
    folded = _fold(value)
    if folded in _FIELD_WORDS:
        return True
    # the name's last words, whole: ``ACCESS_TOKEN`` and ``TOKEN`` name ``access_token``,
    # ``word`` does not name ``db_password``
    words = _NAME_WORDS.findall(name)
    return any(folded == "".join(words[i:]).lower() for i in range(len(words)))


# The words of a name: snake_case, kebab-case, dotted, camelCase, SCREAMING_CASE.
_NAME_WORDS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


_KEY_REST: Final = re.compile(r"[A-Za-z0-9]{8}")
# A part of a value that no code would name: 12+ letters and digits (``_`` and ``-`` too)
# mixing upper case, lower case and digits. ``config.api.key``, ``self._token`` and
# ``$.Values.dbPassword`` have none; a Discord token's three parts (``oHILWmk3qak….Vhu0LY.
# FK1U_2L2Of8…``) read as ``a.b.c`` would otherwise pass for a reference to code.
_KEY_LIKE_PART: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]{12})(?=[a-z0-9_-]*+[A-Z])(?=[A-Z0-9_-]*+[a-z])"
    r"(?=[A-Za-z_-]*+[0-9])[A-Za-z0-9_-]++"
)
# An environment variable's name: words in capitals joined by ``_``, no digit.
_ENV_NAME: Final = re.compile(r"[A-Z]+(?:_[A-Z]+)+")
_SNAKE_WORDS: Final = re.compile(r"[a-z]+(?:_[a-z]+)+|[a-z]+(?:[A-Z][a-z]+)+")
_ALNUM: Final = re.compile(r"[^\W_]")
_AT_VARIABLE: Final = re.compile(r"@?[A-Za-z_][A-Za-z0-9_.]*@")


# A path: absolute, from home, ./ or ../, or a file: URL, of two parts or more ...
_ABSOLUTE_PATH: Final = re.compile(r"(?:file://|~|\.{1,2})?/[\w.+@-]+(?:/[\w.+@-]*)+")
# ... or relative, of three parts or more.
_RELATIVE_PATH: Final = re.compile(r"[\w.+@-]+(?:/[\w.+@-]+){2,}/?")
# A decimal or a percentage: a measurement (a PIN or a numeric password has no point).
_MEASUREMENT: Final = re.compile(r"[0-9]+\.[0-9]+%?|[0-9]{1,3}%")
# Command-line options and their arguments: a command to run again, not a secret.
_OPTIONS: Final = re.compile(r"--?[A-Za-z][\w-]*+[ \t].*")


def _is_path(value: str) -> bool:
    """``value`` is a file's place, not its content: an absolute path (or ``~/``, ``./``,
    ``file://``) with a word among its parts and no part a key's, or a relative path of
    three parts or more made of words (``qt/test/test_bitcoin-qt``). Base64 holds ``/``,
    but its parts are neither words nor free of key-like runs."""
    if _ABSOLUTE_PATH.fullmatch(value):
        if _KEY_LIKE_PART.search(value):
            return False
    elif not (_RELATIVE_PATH.fullmatch(value) and _made_of_words(value)):
        return False
    return any(_REAL_WORD.search(part) and _wordy(part) for part in _PART_SEPARATORS.split(value))


def _is_placeholder(value: str, name: str = "") -> bool:
    """A value that is plainly not a secret: empty, a template, a reference to code, the
    name of its own field, or mostly one character (``xxxx``, ``****``)."""
    if REDACTED in value:
        # Part of it was found to be a key already (a token shape): what follows the
        # mark is the key's rest (``[REDACTED]?Kp6bOOZn1Dl``), unless it is punctuation.
        return _KEY_REST.search(value.replace(REDACTED, "")) is None
    if value.startswith("`") and any(c.isspace() for c in value):
        return True  # a shell command substitution: the value is computed
    if _AT_VARIABLE.fullmatch(value.strip("\"'` \t;,")):
        return True  # @VAR@ (autoconf, Maven filtering; a separator may have taken the first @)
    inner = value.strip("\"'`@\\ \t;,")
    if len(inner) < 3:
        return True
    if _PLACEHOLDER.match(inner) and not _KEY_LIKE_PART.search(inner):
        return True
    if _is_dummy(inner) or _names_itself(inner, name):
        return True
    if _ALNUM.search(inner) is None:
        return True  # punctuation only
    if _SNAKE_WORDS.fullmatch(inner) or _ENV_NAME.fullmatch(inner):
        return True  # an identifier: ``real_secret``, ``ANTHROPIC_API_KEY`` (where a key is)
    if _is_path(inner):
        return True  # where a file is (``SSH_AUTH_SOCK: /tmp/...``, ``PWD=/builds/worker``)
    if _MEASUREMENT.fullmatch(inner) or _OPTIONS.fullmatch(inner):
        return True  # ``keycode: 35.89 ms``, ``100%``; ``pass '-p crate --test ref'``
    if inner.startswith(('{"', "{'")):
        return True  # an object opens (``"token": {"id": ...``): its fields are judged
    most = max(inner.count(c) for c in set(inner))
    return most >= 0.6 * len(inner)


def _credential_like(value: str, *, digit: bool = True) -> bool:
    """Enough to take a bare ``key``'s value for a credential: 16+ characters, letters
    and digits (``digit=False``: letters will do), no blank, and a run of 12 letters and
    digits (``user:756:profile``, a cache key, has none)."""
    inner = value.strip("\"'`@\\ \t;,")
    return (
        len(inner) >= 16
        and _ALNUM_RUN.search(inner) is not None
        and _LETTER.search(inner) is not None
        and (not digit or _DIGIT.search(inner) is not None)
        and _BLANK.search(inner) is None
    )


_ALNUM_RUN: Final = re.compile(r"[A-Za-z0-9]{12}")
_LETTER: Final = re.compile(r"[^\W\d_]")
_BLANK: Final = re.compile(r"\s")


def _verdict(name: str, separator: str) -> bool:
    """``--- PASS: TestX/case#01``, ``PASS: tests/unit``: a test runner's verdict, not a
    setting named ``pass``."""
    return name == "PASS" and separator.lstrip().startswith(":")


def _loose_name(found: set[str], match: re.Match[str]) -> str:
    """``token - 'value'``, ``API Key: value``, ``sl_api_key:value``: judged by the whole
    name the word ends; a bare ``key`` needs a credential-like value."""
    text, start = match.string, match.start()
    window = text[max(0, start - 80) : start]
    name = window[len(window.rstrip(_NAME_CHARS)) :] + match.group("head").strip(" \t:=-'\"")
    if _verdict(name, match.group("head").lstrip(_NAME_CHARS)):
        return match.group(0)
    if _BARE_KEY.fullmatch(name):
        if not _credential_like(match.group("value")):
            return match.group(0)
    elif _secret_name(name) and _weak_secret_name(name):
        if _weak_name_keeps(_weak_secret_name(name), match.group("value")):
            return match.group(0)
    elif not _secret_name(name):
        return match.group(0)  # ``csrf-token: ...``, ``public_key = ...``
    return _head_value(found, match)


_NAME_CHARS: Final = string.ascii_letters + string.digits + "_.-"


_LOWER_WORD: Final = re.compile(r"[a-z]{13}")
_DIGIT: Final = re.compile(r"[0-9]")


def _looks_random(token: str) -> bool:
    """At least 32 characters mixing upper case, lower case and digits, with no run of
    lower-case letters long enough to be a word of a path or an identifier, at most
    one separator per twelve characters (a random base64 value has one per thirty), and
    not made of words (``_made_of_words``). Pure hex and UUIDs (git object names, digests,
    request ids) are left to the reader."""
    core = token.strip("=")
    if len(core) < 32 or core.lower() == core or core.upper() == core:
        return False  # (too short, or one case only)
    if len(_DIGIT.findall(core)) < 2:
        return False
    separators = core.count("/") + core.count("-") + core.count("_")
    if separators > max(4, len(core) // 12):
        return False
    return _LOWER_WORD.search(core) is None and not _made_of_words(core)


# Where a run of an identifier, a path or a test id splits into its parts.
_PART_SEPARATORS: Final = re.compile(r"[-_./+~%]+")
# (a word, camelCase humps, an acronym, a run of digits: findall, each tried once)
_RUNS: Final = re.compile(r"[A-Za-z]+|[0-9]+|[^A-Za-z0-9]+")
_HUMP: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_THREE_DIGIT_RUNS: Final = re.compile(r"[0-9][^0-9]++[0-9]++[^0-9]++[0-9]")
# A digest or an id in hex, a short word before it (``Z60f0ad2...``, a Zuul ref's change id).
_HEX_PART: Final = re.compile(r"[A-Za-z]{0,3}[0-9a-f]{7,}|[0-9A-F]{7,}")
# A part that is a word in its own right: four letters or more, three of them lower case.
_REAL_WORD: Final = re.compile(r"[A-Za-z][a-z]{3}")


def _wordy(part: str, *, hex_ok: bool = True) -> bool:
    """``part`` (letters and digits) reads as a word of an identifier: words written
    lower, Capitalised, camelCase or as an acronym (``GLES1Renderer``, ``rules0``,
    ``Win32``, ``x86``, ``ia2AccessibleTable``), with at most two runs of digits, or a
    number, or (``hex_ok``) a hex digest. A random part fails at its first hump of one
    letter (``KI9DoUJv...``: ``Jv``) or its third run of digits."""
    if part.isdigit() or (hex_ok and _HEX_PART.fullmatch(part)):
        return True
    if len(part) <= 2 and part.isascii() and part.isalpha():
        return True  # a file's extension, an abbreviation: ``.a``, ``qt``
    if _THREE_DIGIT_RUNS.search(part):
        return False  # (the common verdict on a random part, found in one search)
    runs = _RUNS.findall(part)
    # One run of digits (``rules0``, ``GLES1Renderer``, ``win32k``), two only after a
    # version's letters (``v2beta1``): ``kjdfqnnros45baj92`` is no identifier.
    digit_runs = sum(run.isdigit() for run in runs)
    if digit_runs > 2 or (digit_runs == 2 and len(runs[0]) > 2 and not runs[0].isdigit()):
        return False
    for run in runs:
        if run.isdigit():
            continue
        if not run.isascii() or not run.isalpha():
            return False
        if len(run) <= 2 and run.islower() and len(runs) > 1:
            continue  # a version's or a numeronym's letters: v1, x86, fc43, s2s, 2d
        humps = _HUMP.findall(run)
        if "".join(humps) != run or not all(len(hump) >= 2 for hump in humps):
            return False
    return True


def _made_of_words(core: str) -> bool:
    """Every part of the run (split at ``-_./+~%``) is a word, a number or a hex digest:
    an identifier, a path or a parametrised test id (``rules0-exclude_rules0-True``,
    ``cache-linux-<sha256>--rvm-default``), not a key."""
    return all(_wordy(part) for part in _PART_SEPARATORS.split(core) if part)


def _random_parts(token: str) -> str:
    """``token`` with what looks random in it replaced. A run that holds a word in its own
    right (``/opt/worker/cache/IZ1x...``, ``taskcluster-Qh0alAz...``: a path, or an id
    with a word before it) is judged part by part, each part as if it stood alone (so a
    random part under 32 characters stays, as it would alone); any other run is judged
    whole."""
    whole = _looks_random(token)
    if "+" in token or token.endswith("="):
        return REDACTED if whole else token  # base64's, never a path's or an id's
    parts = [part for part in _PART_SEPARATORS.split(token) if part]
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
        if not (_PLAIN_PART.fullmatch(part) or _HEX_PART.fullmatch(part)):
            break
        letters += sum(c.isalpha() for c in part)
        real = real or _REAL_WORD.search(part) is not None
    return real and letters >= 8


_PLAIN_PART: Final = re.compile(r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)[0-9]*|[0-9]+")


def _redact_parts(token: str) -> str:
    out: list[str] = []
    position = 0
    for gap in _PART_SEPARATORS.finditer(token):
        out.append(_one_part(token[position : gap.start()]))
        out.append(gap.group(0))
        position = gap.end()
    out.append(_one_part(token[position:]))
    return "".join(out)


def _one_part(part: str) -> str:
    return REDACTED if _looks_random(part) else part


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


def _secret_kind(text: str) -> bool:
    """A line ``kind: Secret`` somewhere: each ``kind:`` (rare in logs) is found by a
    substring search, and only its line is matched."""
    at = text.find("kind:")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if _K8S_SECRET_KIND.fullmatch(text, start, end):
            return True
        at = text.find("kind:", end)
    return False


def _redact_k8s_secret(text: str) -> str:
    """In a Kubernetes ``Secret`` manifest every value under ``data:``/``stringData:`` is
    a secret (base64 is an encoding, not a protection), whatever its key is called."""
    if "ecret" not in text or not _secret_kind(text):
        return text
    lines = text.split("\n")
    block_indent: int | None = None
    scalar_indent: int | None = None  # inside a ``key: |`` block scalar deeper than this
    in_secret = False
    for number, line in enumerate(lines):
        if number == 0 or _K8S_DOCUMENT.fullmatch(line):
            # each YAML document is judged by its own kind
            end = next(
                (n for n in range(number + 1, len(lines)) if _K8S_DOCUMENT.fullmatch(lines[n])),
                len(lines),
            )
            in_secret = any(_K8S_SECRET_KIND.fullmatch(line) for line in lines[number:end])
            block_indent = None
        if not in_secret:
            continue
        if scalar_indent is not None:
            indent = len(line) - len(line.lstrip(" \t+-"))
            if line.strip() and indent > scalar_indent:
                lines[number] = line[:indent] + REDACTED + line[len(line.rstrip("\r")) :]
                continue
            scalar_indent = None
        data = _K8S_DATA.fullmatch(line)
        if data is not None:
            block_indent = len(data.group("indent"))
            continue
        if block_indent is None:
            continue
        if line.lstrip(" \t+-").startswith("#"):
            continue  # a comment inside the block
        entry = _K8S_ENTRY.fullmatch(line)
        if entry is None or len(entry.group("indent")) <= block_indent:
            block_indent = None if line.strip() else block_indent
            continue
        value = entry.group("value")
        if value.strip() in {"|", ">", "|-", ">-", "|+", ">+"}:
            scalar_indent = len(entry.group("indent"))
            continue
        # (eight base64 characters hold four bytes: no credential)
        if len(value.strip("\"' ")) > 8 and not _is_placeholder(value):
            lines[number] = entry.group("head") + REDACTED + line[entry.end("value") :]
    return "\n".join(lines)


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
    secret) go too. Not words alone (``migrating``, ``bookmark``): where one is redacted
    under a name it goes, but elsewhere it is as likely the word itself, and a name taken
    for a secret's once would take that word out of the whole text."""
    inner = value.strip("\"'`@\\")
    if len(inner) >= 8 and not _WORDS_ONLY.fullmatch(inner):
        found.add(inner)


_WORDS_ONLY: Final = re.compile(r"[A-Za-z]+(?:[ _.-][A-Za-z]+)*+")


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


def _vendor_named(found: set[str], match: re.Match[str]) -> str:
    """A value whose shape and the vendor or kind its name gives say it is a key: 37 hex
    after a Cloudflare name (the global API key), a UUID or 25 letters and digits after a
    MessageBird name, ``su`` + 12 after a Sumo Logic name (the access id), 40 characters
    of base64 mixing cases after a secret/key/token name
    (an AWS secret access key; AWS's documented example key goes too: a key in form is a
    key). Only an all-``x`` value is let through."""
    name, value = match.group("name").lower(), match.group("value")
    if "cloudflare" in name and _HEX37.fullmatch(value):
        pass
    elif "bird" in name and _MESSAGEBIRD_KEY.fullmatch(value):
        pass
    elif _SUMO_ACCESS_ID.fullmatch(value) and any(
        word.lower() in ("sumo", "sumologic") for word in _NAME_WORDS.findall(match.group("name"))
    ):
        pass
    elif not (_AWS_SECRET.fullmatch(value) and _secret_or_aws_name(match.group("name"))):
        return match.group(0)
    if _low_information(value) or len(set(value)) < 5:
        return match.group(0)
    _remember(found, value)
    return match.group("head") + REDACTED


def _secret_or_aws_name(name: str) -> bool:
    """A name an AWS secret key goes by: a secret name (``aws_secret``, ``SECRET_KEY``, not
    ``key_id``), or any name with ``access`` in it (``aws_access``, ``SecretAccessKey``)."""
    lowered = name.lower()
    if not any(word in lowered for word in ("secret", "access", "key", "token")):
        return False
    return "access" in lowered or _secret_name(name)


def _user_pair(found: set[str], match: re.Match[str]) -> str:
    """``-u user:password``: judged by its password half (``$2``, ``[PASSWORD]``,
    ``pass`` are no passwords); the whole pair goes."""
    value = match.group("value")
    secret = value.split(":", 1)[1] if ":" in value else value
    if secret.strip("\"' ").startswith("{{"):
        return match.group(0)  # a template fills it in: ``--user "{{ .user }}:{{ .pass }}"``
    if secret.strip("\"' ") and _is_placeholder(secret.strip("\"'{}")):
        return match.group(0)
    if not secret.strip("\"' ") and _is_placeholder(value.split(":", 1)[0].strip("\"'{}")):
        return match.group(0)  # ``-u "$USER:"``
    _remember(found, value)
    return match.group("head") + REDACTED


def _auth_header(found: set[str], match: re.Match[str]) -> str:
    value = match.group("value")
    if _is_placeholder(value) or value.startswith(("$", "<", "{", "*", "...")):
        return match.group(0)
    _remember(found, value)
    return match.group("head") + REDACTED


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    """``db_password``, ``apiKey2``, ``password_secure`` — not ``key_id``, ``TokenFile``."""
    if name.lower().endswith("authorization"):  # the header rule's: its scheme word stays
        return False
    return _BUNDLER_HOST.search(name) is not None or not (
        _QUALIFIER.search(name) or _NOT_SECRET_NAME.search(name)
    )


# A secret word where it ends a word of a name: ``accesstoken``, ``dbPassword``,
# ``sslauth``, ``tokens``. (Inside a word it is another word: ``keycode``,
# ``authenticator``, ``passthrough``.)
_ENDS_WITH_SECRET: Final = re.compile(
    r"(?:token|secrete?|passw(?:or)?d|passphrase|passcode|pass|pwd|pw|creds?|credentials?"
    r"|auth|key)s?$"
)
_ENDS_WITH_KEY: Final = re.compile(r"keys?$")
# What a key is a key to, when it is a credential (``api_key``, ``privateKey``,
# ``SSH_KEY``). Any other key (``name_key``, ``theme_key``, ``gpgkey``, ``fedora-gpg-keys``)
# is a key in a map, a file or a package as often as a credential.
_CREDENTIAL_KEY_KINDS: Final = frozenset(
    {"api", "secret", "private", "priv", "access", "client", "app", "application", "master"}
    | {"encryption", "encrypt", "crypt", "signing", "sign", "license", "licence", "auth"}
    | {"account", "service", "consumer", "session", "shared", "hmac", "ssh", "deploy", "jwt"}
    | {"webhook", "subscription", "storage", "admin", "root", "aes", "rsa", "cipher", "dev"}
    | {"developer", "partner", "merchant", "server", "live", "prod", "production", "user"}
)


@functools.lru_cache(maxsize=4096)
def _weak_secret_name(name: str) -> str:
    """Why a name that holds a secret word does not say its value is a secret, or ``""``
    when it does. Such a name needs a credential-like value (``_weak_name_keeps``), as a
    bare ``key`` does:

    * ``"key"``: it says ``key`` without a credential's kind (``name_key``, ``gpgkey``,
      ``fedora-gpg-keys-0``);
    * ``"word"``: it has the secret word only inside a longer word (``keycode``,
      ``authenticator``), it is a file's name (``devtoken.obj``), or it is one camelCase
      identifier of three words or more that ends in another word (``AddAuthTokenToUsers``,
      ``FromJSONKeyCoerce``: a class, a migration, a rule).
    """
    if _FILE_EXTENSION.search(name):
        return "word"  # a file: ``devtoken.obj: locally defined symbol``
    words = [word.lower() for word in _NAME_WORDS.findall(name)]
    carriers = [at for at, word in enumerate(words) if _carries_secret(word)]
    if not carriers:
        if any(
            _carries_secret(segment) and not _ENDS_WITH_KEY.search(segment)
            for segment in _NAME_SEPARATOR.split(name.lower())
        ):
            return ""  # a secret word in odd case: ``SeCrEt``
        # (``sonar.login`` is SonarQube's token, ``BUNDLE_<HOST>`` Bundler's credentials)
        strong = "sonar" in words or _BUNDLER_HOST.search(name) is not None
        return "" if strong else "word"
    if all(_ENDS_WITH_KEY.search(words[at]) for at in carriers) and not any(
        _credential_key(words, at) for at in carriers
    ):
        return "key"
    named = [word for word in words if not word.isdigit()]
    phrase = len(named) >= 3 and _NAME_SEPARATOR.search(name) is None
    return "word" if phrase and not _carries_secret(named[-1]) else ""


def _weak_name_keeps(weakness: str, value: str) -> bool:
    """A weak name's value is kept unless it is credential-like; after a key of no
    credential's kind, letters alone will do (a vendor's key may hold no digit)."""
    return bool(weakness) and not _credential_like(value, digit=weakness != "key")


_NAME_SEPARATOR: Final = re.compile(r"[_.\-]")
# A file's name: a name whose last dotted part is a source, object, archive or data file's
# extension.
_FILE_EXTENSION: Final = re.compile(
    r"\.(?:obj|o|a|so|dll|lib|exe|pdb|rmeta|rlib|c|h|cc|cpp|hpp|cxx|py|pyc|js|mjs|cjs|ts|tsx"
    r"|jsx|rb|go|rs|java|class|jar|kt|scala|swift|m|mm|cs|php|pl|pm|sh|bat|ps1|json|ya?ml"
    r"|xml|toml|ini|cfg|conf|txt|md|rst|html?|css|scss|sass|less|lock|log|csv|png|svg|jpe?g"
    r"|gif|zip|gz|tgz|tar|whl|rpm|deb|pom|gradle|proto|sql|list|d)$",
    re.IGNORECASE,
)


def _carries_secret(word: str) -> bool:
    """``word`` (lower case) ends with a secret word: ``token``, ``accesstoken``,
    ``dbpassword``, ``keys``. ``auth`` only as a word of its own: it ends the names of
    protocols, modules and files as often (``oauth``, ``sslauth``, ``cauth``)."""
    found = _ENDS_WITH_SECRET.search(word)
    return found is not None and (found.start() == 0 or not found.group(0).startswith("auth"))


def _credential_key(words: list[str], at: int) -> bool:
    """``words[at]`` (ending in ``key``) names a credential: its kind is in the word
    (``apikey``, ``privatekey``) or the word before it (``api_key``, ``SSH_KEY``)."""
    word = words[at]
    kind = word[: _ENDS_WITH_KEY.search(word).start()]  # type: ignore[union-attr]
    if kind:
        return kind in _CREDENTIAL_KEY_KINDS or any(
            kind.endswith(k) for k in ("api", "secret", "private", "access")
        )
    return at > 0 and words[at - 1] in _CREDENTIAL_KEY_KINDS


def _quoted_literal(found: set[str], match: re.Match[str]) -> str:
    """A quoted literal next to a secret name (a comparison, a call): the literal goes,
    quotes kept."""
    name = match.group("name") or match.group("name2")
    key = "value" if match.group("value") is not None else "value2"
    value = match.group(key)
    if not (_secret_name(name) or _vault_secret_id(name, value)) or _is_placeholder(value, name):
        return match.group(0)
    if _weak_name_keeps(_weak_secret_name(name), value):
        return match.group(0)
    _remember(found, value)
    start, end = match.start(key) - match.start(), match.end(key) - match.start()
    whole = match.group(0)
    return whole[:start] + value[0] + REDACTED + value[-1] + whole[end:]


def _assignment(found: set[str], match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if _COUNT.fullmatch(value.strip("\"'`,;)]}")) and name.lower().endswith("tokens"):
        return match.group(0)  # ``"output_tokens": 345``: a count of tokens, not one
    if not (_secret_name(name) or _vault_secret_id(name, value)) or _is_placeholder(value, name):
        return match.group(0)
    if _verdict(name, match.group("sep")):
        return match.group(0)
    if (
        (_BARE_KEY.fullmatch(name) and not _credential_like(value))
        or _weak_name_keeps(_weak_secret_name(name), value)
    ) and not _vault_secret_id(name, value):
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


_COUNT: Final = re.compile(r"[0-9]{1,12}")


# A Vault AppRole ``secret_id`` is the role's password, a UUID. (Any other ``*_id`` names
# what it identifies; AWS's ``SecretId`` names a secret by its path or ARN, no UUID.)
_SECRET_ID_NAME: Final = re.compile(r"(?i)(?:.*[_.\-])?secret[_.\-]?id[0-9]*")
_UUID_VALUE: Final = re.compile(
    r"[\"'`]?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}[\"'`]?[;,]?"
)


def _vault_secret_id(name: str, value: str) -> bool:
    return _SECRET_ID_NAME.fullmatch(name) is not None and _UUID_VALUE.fullmatch(value) is not None


def _public_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of PEM public keys, certificates and PGP messages (BEGIN to END, or to the
    end of a cut text): public by design or ciphertext, and a certificate chain in a TLS
    log is evidence."""
    if "-----BEGIN" not in text:
        return []
    spans: list[tuple[int, int]] = []
    for begin in _PUBLIC_BEGIN.finditer(text):
        if spans and begin.start() < spans[-1][1]:
            continue
        end = text.find("-----END", begin.end())
        spans.append((begin.start(), len(text) if end < 0 else end))
    return spans


def _random_token(found: set[str], public: list[tuple[int, int]], match: re.Match[str]) -> str:
    token = match.group(0)
    rewritten = _random_parts(token)
    if rewritten == token or _is_dummy(token):
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
    # (one line back, at most 4 KiB: a SOPS value fits; a huge line costs no more)
    start = match.start()
    opened = text.rfind("ENC[", max(0, start - 4096), start)
    if opened >= 0 and text.find("]", opened, start) < 0 and text.find("\n", opened, start) < 0:
        return token  # inside SOPS ciphertext: ``ENC[AES256_GCM,data:...,iv:...]``
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


def _token(found: set[str], match: re.Match[str]) -> str:
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
    if _low_information(body) or _FILE_NAME.search(token):
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
    return _PLAIN_WORD.fullmatch(part) is not None and _wordy(part, hex_ok=False)


def _prefix_length(token: str) -> int:
    for prefix in _BY_LENGTH:
        if token.startswith(prefix):
            return len(prefix)
    return 0


_Rewrite = Callable[[set[str], re.Match[str]], str]
# The name rules, in order, each with the substrings (ASCII lower case) a line must have
# for the rule to match there.
_NAME_RULES: Final[tuple[tuple[re.Pattern[str], _Rewrite, tuple[str, ...]], ...]] = (
    (_RARE_TOKEN, _token, (":aa", "-us", "|", ".atlasv1.", "webhook", "hooks.slack.com")),
    (_VENDOR_NAMED, _vendor_named, ("cloudflare", "bird", "sumo", "key", "token", "secret")),
    (_URL_PASSWORD, _head_value, ("://",)),
    (_URL_SIGNATURE, _head_value, ("sig=", "signature=")),
    (_USER_FLAG, _user_pair, ("-u",)),
    (_SECRET_FLAG, _head_value, ("-",)),
    (_AUTH_HEADER, _auth_header, ("authorization",)),
    (_COMPARISON, _quoted_literal, ("==", "!=")),
    (_CALL_ARG, _quoted_literal, ('"', "'")),
    (_ASSIGNMENT, _assignment, ("=", ":")),
    (_LOOSE_NAME, _loose_name, (":", "=", "-")),
)


def _whole_text_rules(text: str, found: set[str]) -> str:
    """The rules that are one cheap pass over any text: PEM blocks, Kubernetes secrets,
    token shapes, XML (starts with a literal)."""
    text = _redact_k8s_secret(_redact_pem(text))
    text = _TOKEN.sub(partial(_token, found), text)
    text = _XML_KEY_VALUE.sub(partial(_head_value, found), text)
    return _XML_ELEMENT.sub(partial(_head_value, found), text)


def _lower_same_length(text: str) -> str:
    """A lower-cased copy whose indices are those of ``text``. ``str.lower`` is fast and
    lowers ASCII exactly; when it changes the length (``'İ'`` becomes two characters),
    lower ASCII only."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _keyword_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint (start, end) spans of whole lines that contain a keyword
    (neighbouring lines make one span). One regular-expression search per such line: the
    search resumes after the line it found. (A value on the line after its name, as in
    ``<token>\\n  value``, is the XML rule's, which runs over the whole text.)"""
    lowered = _lower_same_length(text)
    spans: list[tuple[int, int]] = []
    found = _KEYWORD.search(lowered)
    while found is not None:
        at = found.start()
        start = lowered.rfind("\n", 0, at) + 1
        end = lowered.find("\n", at)
        if end < 0:
            end = len(text)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        found = _KEYWORD.search(lowered, end + 1) if end < len(text) else None
    return spans


def _name_rules(text: str, found: set[str]) -> str:
    """The name rules over the lines that may hold a name. Each rule runs once, over its
    gated lines joined into one string (rules never match across a line break, and never
    add or remove one, so the result splits back line by line)."""
    spans = _keyword_spans(text)
    if not spans:
        return text
    chunks = [text[start:end] for start, end in spans]
    gates = _Gates([_lower_same_length(chunk) for chunk in chunks])
    changed = False
    for pattern, rewrite, needles in _NAME_RULES:
        chosen = gates.chunks_with(needles)
        if not chosen:
            continue
        joined = "\n".join(chunks[i] for i in chosen)
        out = pattern.sub(partial(rewrite, found), joined)
        if out == joined:
            continue
        changed = True
        lines = out.split("\n")
        counts = [chunks[i].count("\n") + 1 for i in chosen]
        if len(lines) != sum(counts):  # never expected: fall back to one chunk at a time
            for i in chosen:
                chunks[i] = pattern.sub(partial(rewrite, found), chunks[i])
            continue
        position = 0
        for i, count in zip(chosen, counts, strict=True):
            chunks[i] = "\n".join(lines[position : position + count])
            position += count
    return _rewrite_spans_with(text, spans, chunks) if changed else text


class _Gates:
    """Which chunks hold which needles. A rule whose needle is common (``=``, ``:``,
    ``-``) takes every chunk; a rare one is found by substring search in all chunks at
    once and mapped back to its chunks, so a rule costs its needle's occurrences, not one
    test per chunk."""

    _COMMON: Final = frozenset({"=", ":", "-"})

    def __init__(self, lowered: list[str]) -> None:
        self._joined = "\n".join(lowered)
        self._starts: list[int] = []
        position = 0
        for chunk in lowered:
            self._starts.append(position)
            position += len(chunk) + 1

    def chunks_with(self, needles: tuple[str, ...]) -> list[int]:
        if self._COMMON.intersection(needles):
            return list(range(len(self._starts)))
        chosen: set[int] = set()
        for needle in needles:
            at = self._joined.find(needle)
            while at >= 0:
                index = bisect.bisect_right(self._starts, at) - 1
                chosen.add(index)
                # resume at the next chunk: one hit per chunk is enough
                nxt = (
                    self._starts[index + 1] if index + 1 < len(self._starts) else len(self._joined)
                )
                at = self._joined.find(needle, nxt)
        return sorted(chosen)


def _rewrite_spans_with(text: str, spans: list[tuple[int, int]], chunks: list[str]) -> str:
    parts: list[str] = []
    position = 0
    for (start, end), chunk in zip(spans, chunks, strict=True):
        parts.append(text[position:start])
        parts.append(chunk)
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _propagate(text: str, found: set[str]) -> str:
    """A value once known to be a secret goes wherever else it appears (longest first, so
    a value containing another is replaced whole)."""
    values = sorted((v for v in found if v != REDACTED), key=len, reverse=True)
    if not values:
        return text
    if len(values) <= 32:
        # A few: a substring replacement each (C speed; compiling a value of a megabyte
        # into a regular expression takes seconds).
        for value in values:
            text = text.replace(value, REDACTED)
        return text
    # Many: one pass for all of them (an alternation tries the longest first).
    return re.sub("|".join(map(re.escape, values)), REDACTED, text)


def _redact_unfiltered(text: str) -> str:
    """What ``redact`` computes, with every name rule run over the whole text (tests
    compare the two)."""
    found: set[str] = set()
    text = _whole_text_rules(text, found)
    for pattern, rewrite, _needles in _NAME_RULES:
        text = pattern.sub(partial(rewrite, found), text)
    text = _CANDIDATE.sub(partial(_random_token, found, _public_blocks(text)), text)
    return _propagate(text, found)


def redact(text: str) -> str:
    """``text`` with every secret this module recognises replaced by ``[REDACTED]``.

    Pure, linear in ``len(text)``, and idempotent (``redact(redact(t)) == redact(t)``).
    """
    found: set[str] = set()
    text = _whole_text_rules(text, found)
    # REDACTED holds no keyword, so the lines to look at are those of the text as it is.
    text = _name_rules(text, found)
    text = _CANDIDATE.sub(partial(_random_token, found, _public_blocks(text)), text)
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
