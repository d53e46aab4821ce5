"""``REDACTED``, the mark a secret leaves, and the values that carry no information.

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
nothing. So is a value that is a file's place (``PWD=/builds/worker``, ``SSH_AUTH_SOCK:
/tmp/...``, ``gpgkey: file:///etc/pki/...``: where a secret is, never the secret), a
measurement (``35.89``, ``100%``: a PIN has no point) or a command's options
(``pass '-p crate --test ref'``).

Recall before over-redaction: two filters other scanners use were measured on their test
data and left out, because each let true positives through: obvious sequences
(``123456789``, ``abcdefghij``, ``abcd1234abcd1234``: test suites write keys so) and a
minimum entropy per value (``abc``, ``test`` under a password name are passwords here).
"""

from __future__ import annotations

import re
from typing import Final

from orchestrator.redaction.words import (
    DIGIT,
    NAME_WORDS,
    PART_SEPARATORS,
    REAL_WORD,
    made_of_words,
    wordy,
)

REDACTED: Final = "[REDACTED]"


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


def is_dummy(value: str) -> bool:
    """A documentation value or a near miss written to test a scanner, not a credential:
    ``EXAMPLE``, ``fake``, or mostly one character repeated (``xxxxx``; a long random
    value that merely contains ``AAAAA`` is no dummy: Twitter bearer tokens start so)."""
    if _DUMMY.search(value.lower()) is not None:
        return True
    return _REPEAT.search(value) is not None and len(_REPEAT.sub("", value)) < 8


def low_information(value: str) -> bool:
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
    words = NAME_WORDS.findall(name)
    return any(folded == "".join(words[i:]).lower() for i in range(len(words)))


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
    elif not (_RELATIVE_PATH.fullmatch(value) and made_of_words(value)):
        return False
    return any(REAL_WORD.search(part) and wordy(part) for part in PART_SEPARATORS.split(value))


def is_placeholder(value: str, name: str = "") -> bool:
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
    if is_dummy(inner) or _names_itself(inner, name):
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


def credential_like(value: str, *, digit: bool = True) -> bool:
    """Enough to take a bare ``key``'s value for a credential: 16+ characters, letters
    and digits (``digit=False``: letters will do), no blank, and a run of 12 letters and
    digits (``user:756:profile``, a cache key, has none)."""
    inner = value.strip("\"'`@\\ \t;,")
    return (
        len(inner) >= 16
        and _ALNUM_RUN.search(inner) is not None
        and _LETTER.search(inner) is not None
        and (not digit or DIGIT.search(inner) is not None)
        and _BLANK.search(inner) is None
    )


_ALNUM_RUN: Final = re.compile(r"[A-Za-z0-9]{12}")
_LETTER: Final = re.compile(r"[^\W\d_]")
_BLANK: Final = re.compile(r"\s")
