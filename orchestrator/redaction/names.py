"""Which names say their value is a secret.

A secret word counts in a name where it ends a word of it: ``accesstoken`` and
``dbPassword`` are secret names, and ``auth`` only as a word of its own (``oauth``,
``sslauth`` are not). Names that hold a key's *name* rather than the key (``primaryKey``,
``key_id``, ``TokenFile``, ``keyword``) are not secret names; a bare ``key``/``key1`` (a
map's key as often as a credential) counts only with a credential-like value (16+
characters, letters and digits, a run of 12 of them), and so does a name that holds a
secret word without saying its value is a secret (``weak_secret_name``): the word inside
another (``keycode``, ``authenticator``, ``sf-cauth``), a key of no credential's kind
(``name_key``, ``gpgkey``, ``fedora-gpg-keys-0``), a file's name (``devtoken.obj``), a
camelCase identifier that ends in another word (``AddAuthTokenToUsers: migrating``, a
schema migration).
"""

from __future__ import annotations

import functools
import re
from typing import Final

from orchestrator.redaction.placeholders import credential_like
from orchestrator.redaction.words import NAME_WORDS

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


SECRET_WORD_ANY_CASE: Final = _any_case(_SECRET_WORD)


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
BARE_KEY: Final = re.compile(r"[_.\-]*[kK][eE][yY][sS]?(?:[0-9]*|[A-Z])")


def secret_or_aws_name(name: str) -> bool:
    """A name an AWS secret key goes by: a secret name (``aws_secret``, ``SECRET_KEY``, not
    ``key_id``), or any name with ``access`` in it (``aws_access``, ``SecretAccessKey``)."""
    lowered = name.lower()
    if not any(word in lowered for word in ("secret", "access", "key", "token")):
        return False
    return "access" in lowered or secret_name(name)


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
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
def weak_secret_name(name: str) -> str:
    """Why a name that holds a secret word does not say its value is a secret, or ``""``
    when it does. Such a name needs a credential-like value (``weak_name_keeps``), as a
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
    words = [word.lower() for word in NAME_WORDS.findall(name)]
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


def weak_name_keeps(weakness: str, value: str) -> bool:
    """A weak name's value is kept unless it is credential-like; after a key of no
    credential's kind, letters alone will do (a vendor's key may hold no digit)."""
    return bool(weakness) and not credential_like(value, digit=weakness != "key")


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


# A Vault AppRole ``secret_id`` is the role's password, a UUID. (Any other ``*_id`` names
# what it identifies; AWS's ``SecretId`` names a secret by its path or ARN, no UUID.)
_SECRET_ID_NAME: Final = re.compile(r"(?i)(?:.*[_.\-])?secret[_.\-]?id[0-9]*")
_UUID_VALUE: Final = re.compile(
    r"[\"'`]?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}[\"'`]?[;,]?"
)


def vault_secret_id(name: str, value: str) -> bool:
    return _SECRET_ID_NAME.fullmatch(name) is not None and _UUID_VALUE.fullmatch(value) is not None
