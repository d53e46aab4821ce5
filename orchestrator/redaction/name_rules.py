"""The rules that find a secret by the name or the syntax around it, and rewrite it.

* keys told by their vendor's name, whatever the setting is called: Cloudflare's global
  key, MessageBird keys, Sumo Logic access ids, and an AWS secret access key after any
  name with secret/access/key/token in it and any separator (``,``, ``||``, ``>`` too);
* passwords in URLs (``scheme://user:password@host``, a password holding ``@`` whole),
  signed-URL signatures (``sig=``), and ``-u user:password``;
* ``Authorization`` header values (any scheme word: ``Bearer``, ``Api-Token`` ...);
* the value of a setting whose name says it is a secret (``names``): ``NAME=value`` and
  every other assignment spelling (``:=``, ``::=``, ``?=``, ``+=``, ``.=``, ``=>``, ``: ``,
  JSON, ``env["NAME"] = value``, ``set("NAME", "value")``, ``--token value``), an XML
  element or ``key="..Password" value="..."`` pair, and a value alone on the next line of
  ``<nameToken>``. The name is kept, so the model still learns *which* setting was
  involved. A test runner's ``PASS: test_name`` is no name at all.

A value found under a secret name is remembered (``found``) and goes wherever else it
appears in the text, except a value of words alone (``migrating``): where it stands under
the name it goes, but elsewhere it is as likely the word itself, and one name taken for a
secret's would take that word out of a whole log.

Every match of these rules holds one of a few ASCII words (``KEYWORD``); ``core`` hands
the rules only the lines that have one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Final

from orchestrator.redaction.names import (
    BARE_KEY,
    SECRET_WORD_ANY_CASE,
    secret_name,
    secret_or_aws_name,
    vault_secret_id,
    weak_name_keeps,
    weak_secret_name,
)
from orchestrator.redaction.placeholders import (
    REDACTED,
    credential_like,
    is_placeholder,
    low_information,
)
from orchestrator.redaction.vendors import RARE_TOKEN, rewrite_token
from orchestrator.redaction.words import NAME_WORDS

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


_ASSIGNMENT: Final = re.compile(
    # A name starts where a run of name characters starts (linear: one attempt per run) ...
    rf"(?<![{_NAME_CHAR}$])\$?"
    rf"(?=[{_NAME_CHAR}]*?{SECRET_WORD_ANY_CASE}|BUNDLE_)"
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


# ``if (password == "literal")`` and ``"literal" != api_key``: a literal compared with a
# secret is the secret.
# (a lookahead finds the word, then the run is taken possessively: linear)
_NAME_WORD = rf"(?=[A-Za-z0-9_.]*?{SECRET_WORD_ANY_CASE})[A-Za-z0-9_.]++"
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
    rf"|\([ \t]*+[\"'](?P<name2>[{_NAME_CHAR}]*?{SECRET_WORD_ANY_CASE}[{_NAME_CHAR}]*+)[\"']"
    r"[ \t]*+,[ \t]*+(?P<value2>\"[^\"\n]*+\"|'[^'\n]*+')"
)
# <add key="ClearTextPassword" value="..." />
XML_KEY_VALUE: Final = re.compile(
    rf"(?P<head>key=\"[^\"\n]*?{SECRET_WORD_ANY_CASE}\"[ \t]++value=\")(?P<value>[^\"\n]++)\""
)
# <fooToken>value</fooToken> and the value alone on the next line (to the next '<' or the
# end of the line: Jenkins writes ``<secret>{AQAAABAAA ...}</secret>``).
XML_ELEMENT: Final = re.compile(
    rf"(?P<head><[A-Za-z0-9_.-]*?{SECRET_WORD_ANY_CASE}>[ \t]*+\n?[ \t]*+)"
    r"(?P<value>[^<\s](?:[^<\n]*[^<\s])?)"
)
# ``word token``/``word secret`` followed by a long value: "telegram bot: <x>" is rare,
# but "slack token - 'xoxb…'" and "API Key: sk-…" are common in logs. (The compound
# name the word ends, ``csrf-token``, is judged in ``_loose_name``.)
# (a '-' separates only after a blank: ``wicket-auth-roles`` and ``RPM-GPG-KEY-fedora-43``
# are kebab-case words)
_LOOSE_NAME: Final = re.compile(
    rf"(?<![A-Za-z0-9])(?P<head>(?:{SECRET_WORD_ANY_CASE}|[bB][oO][tT])s?"
    r"(?:[ \t]*+[:=]|[ \t]++-)[ \t]*+['\"]?)"
    r"(?P<value>(?=[A-Za-z_\-+/=.:~]{0,40}[0-9])[A-Za-z0-9_\-+/=.:~]{16,}+)"
)


# Every match of a name rule contains one of these (in ASCII lower case): the lines that
# have none skip the name rules.
KEYWORD: Final = re.compile(
    # (a trie by first character: token secret sonar key pass(w) pw pat cred auth
    # authorization bot bundle_ -u --user -us<digit> :// :aa sig= signature= <digit>|
    # .atlasv1. webhook hooks.slack.com. A Mailchimp key's ``-us`` and a Facebook
    # token's ``|`` are taken with the digit beside them: a table's ``|`` and ``en-us``
    # are common in logs, and each line with a keyword is handed to every name rule.)
    r"(?:t(?:oken)|s(?:ecret|onar)|k(?:ey)|p(?:ass(?!ed|ing|es)|w|at[ \t=])|c(?:red|loudflare)"
    r"|a(?:uth(?!or)|uthorization)|b(?:ot|undle_)|-(?:u[ \t=]|-user|us[0-9])|:(?://|aa)"
    r"|sig=|signature=|\|(?<=[0-9]\|)|\.atlasv1\.|webhook|hooks\.slack\.com|message[ _.-]?bird|sumo)"
)


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
    if BARE_KEY.fullmatch(name):
        if not credential_like(match.group("value")):
            return match.group(0)
    elif secret_name(name) and weak_secret_name(name):
        if weak_name_keeps(weak_secret_name(name), match.group("value")):
            return match.group(0)
    elif not secret_name(name):
        return match.group(0)  # ``csrf-token: ...``, ``public_key = ...``
    return head_value(found, match)


_NAME_CHARS: Final = string.ascii_letters + string.digits + "_.-"


def _remember(found: set[str], value: str) -> None:
    """Note a redacted value, so its other occurrences (where nothing tells it is a
    secret) go too. Not words alone (``migrating``, ``bookmark``): where one is redacted
    under a name it goes, but elsewhere it is as likely the word itself, and a name taken
    for a secret's once would take that word out of the whole text."""
    inner = value.strip("\"'`@\\")
    if len(inner) >= 8 and not _WORDS_ONLY.fullmatch(inner):
        found.add(inner)


_WORDS_ONLY: Final = re.compile(r"[A-Za-z]+(?:[ _.-][A-Za-z]+)*+")


def head_value(found: set[str], match: re.Match[str]) -> str:
    """Keep the head, redact the value unless it is a placeholder."""
    value = match.group("value")
    if is_placeholder(value):
        return match.group(0)
    _remember(found, value)
    return (
        match.group(0)[: match.start("value") - match.start()]
        + REDACTED
        + ("@" if match.group(0).endswith("@") and not value.endswith("@") else "")
        + ('"' if match.re is XML_KEY_VALUE else "")
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
        word.lower() in ("sumo", "sumologic") for word in NAME_WORDS.findall(match.group("name"))
    ):
        pass
    elif not (_AWS_SECRET.fullmatch(value) and secret_or_aws_name(match.group("name"))):
        return match.group(0)
    if low_information(value) or len(set(value)) < 5:
        return match.group(0)
    _remember(found, value)
    return match.group("head") + REDACTED


def _user_pair(found: set[str], match: re.Match[str]) -> str:
    """``-u user:password``: judged by its password half (``$2``, ``[PASSWORD]``,
    ``pass`` are no passwords); the whole pair goes."""
    value = match.group("value")
    secret = value.split(":", 1)[1] if ":" in value else value
    if secret.strip("\"' ").startswith("{{"):
        return match.group(0)  # a template fills it in: ``--user "{{ .user }}:{{ .pass }}"``
    if secret.strip("\"' ") and is_placeholder(secret.strip("\"'{}")):
        return match.group(0)
    if not secret.strip("\"' ") and is_placeholder(value.split(":", 1)[0].strip("\"'{}")):
        return match.group(0)  # ``-u "$USER:"``
    _remember(found, value)
    return match.group("head") + REDACTED


def _auth_header(found: set[str], match: re.Match[str]) -> str:
    value = match.group("value")
    if is_placeholder(value) or value.startswith(("$", "<", "{", "*", "...")):
        return match.group(0)
    _remember(found, value)
    return match.group("head") + REDACTED


def _quoted_literal(found: set[str], match: re.Match[str]) -> str:
    """A quoted literal next to a secret name (a comparison, a call): the literal goes,
    quotes kept."""
    name = match.group("name") or match.group("name2")
    key = "value" if match.group("value") is not None else "value2"
    value = match.group(key)
    if not (secret_name(name) or vault_secret_id(name, value)) or is_placeholder(value, name):
        return match.group(0)
    if weak_name_keeps(weak_secret_name(name), value):
        return match.group(0)
    _remember(found, value)
    start, end = match.start(key) - match.start(), match.end(key) - match.start()
    whole = match.group(0)
    return whole[:start] + value[0] + REDACTED + value[-1] + whole[end:]


def _assignment(found: set[str], match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if _COUNT.fullmatch(value.strip("\"'`,;)]}")) and name.lower().endswith("tokens"):
        return match.group(0)  # ``"output_tokens": 345``: a count of tokens, not one
    if not (secret_name(name) or vault_secret_id(name, value)) or is_placeholder(value, name):
        return match.group(0)
    if _verdict(name, match.group("sep")):
        return match.group(0)
    if (
        (BARE_KEY.fullmatch(name) and not credential_like(value))
        or weak_name_keeps(weak_secret_name(name), value)
    ) and not vault_secret_id(name, value):
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


# A count as tools print one: 345, 1,700 (thousands grouped) or 3.8k / 1.2M (aider's
# "Tokens: 3.8k sent, 60 received."). Never a secret, and only after a name ending in
# ``tokens``: the singular ``token: 3.8k`` is still redacted.
_COUNT: Final = re.compile(
    r"[0-9]{1,12}|[0-9]{1,3}(?:,[0-9]{3}){1,4}|[0-9]{1,6}(?:\.[0-9]{1,2})?[kKmM]"
)


_Rewrite = Callable[[set[str], re.Match[str]], str]
# The name rules, in order, each with the substrings (ASCII lower case) a line must have
# for the rule to match there.
NAME_RULES: Final[tuple[tuple[re.Pattern[str], _Rewrite, tuple[str, ...]], ...]] = (
    (RARE_TOKEN, rewrite_token, (":aa", "-us", "|", ".atlasv1.", "webhook", "hooks.slack.com")),
    (_VENDOR_NAMED, _vendor_named, ("cloudflare", "bird", "sumo", "key", "token", "secret")),
    (_URL_PASSWORD, head_value, ("://",)),
    (_URL_SIGNATURE, head_value, ("sig=", "signature=")),
    (_USER_FLAG, _user_pair, ("-u",)),
    (_SECRET_FLAG, head_value, ("-",)),
    (_AUTH_HEADER, _auth_header, ("authorization",)),
    (_COMPARISON, _quoted_literal, ("==", "!=")),
    (_CALL_ARG, _quoted_literal, ('"', "'")),
    (_ASSIGNMENT, _assignment, ("=", ":")),
    (_LOOSE_NAME, _loose_name, (":", "=", "-")),
)
