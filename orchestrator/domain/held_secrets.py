"""Which secrets the orchestrator holds, and so redacts by value (``redaction/held.py``).

Held whole, from the environment:

* every variable whose name looks like a secret (``keys.is_secret_name``: …TOKEN, …KEY,
  …SECRET, …PASSWORD…), the ones the key shield blanks: the ledger and approval keys,
  the model key, ``GITHUB_TOKEN``, ``GITLAB_TOKEN``, ``PGPASSWORD``, whatever else;
* every variable the config names as holding a secret, whatever its name: the model's
  ``api_key_env``, a source's ``token_env``, a notify target's ``url_env`` (a webhook's
  URL is its credential) and ``password_env`` (SMTP), and every ``pass_env`` entry of a
  stage, check or engine (a value the orchestrator hands a stage is one it must not see
  come back; a stage's ``pass_env`` values are held again when the stage starts,
  ``execution/stage_env.py``).

Held by their credentials only (the password of the URL's user, and a query parameter
named like a secret): the broker URL (``$ORCHESTRATOR_BROKER_URL``, ``[distributed]
broker_url``) and the database URL (``$ORCHESTRATOR_STORAGE_URL``, ``[storage] url``):
their host and database name are no secret, and a diagnosis may need them. Any held
value that is a URL with a password holds that password too, alone.

A value too short or too common to tell from ordinary text is dropped later, by the
matcher (``redaction.held.worth_holding``). Read from the config's TOML as written (not
validated: the CLI holds these before it loads a config, and a key added to the config
later, wherever it sits, is found by its name). Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from orchestrator.domain.keys import BROKER_URL_ENV, STORAGE_URL_ENV, is_secret_name

# Settings whose value is the name of a variable that holds a secret.
NAMING_KEYS: Final = frozenset({"api_key_env", "token_env", "url_env", "password_env"})
# Settings whose value is a list of such names.
NAMING_LISTS: Final = frozenset({"pass_env"})
# Whose values are URLs that may carry a password: variables and (table, key) settings.
URL_VARIABLES: Final = (BROKER_URL_ENV, STORAGE_URL_ENV)
URL_SETTINGS: Final = (("distributed", "broker_url"), ("storage", "url"))
_SECRET_PARAM: Final = ("pass", "secret", "token", "auth", "key", "cred", "sig")


def named_variables(config: Mapping[str, object]) -> set[str]:
    """The variables ``config`` (its TOML as read) names as holding a secret, at any depth."""
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in NAMING_KEYS and isinstance(value, str):
                    names.add(value)
                elif key in NAMING_LISTS and isinstance(value, list):
                    names.update(v for v in value if isinstance(v, str))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(config)
    return names


def url_credentials(url: str) -> Iterator[str]:
    """The secrets in ``url``: its user's password (as written and decoded; the whole
    user part when it has no ``:``, which some clients read as the password) and the
    values of query parameters named like a secret."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        user, colon, password = userinfo.partition(":")
        secret = password if colon else user
        yield secret
        yield unquote(secret)
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if any(word in name.lower() for word in _SECRET_PARAM):
            yield value


def _config_urls(config: Mapping[str, object]) -> Iterator[str]:
    for table, key in URL_SETTINGS:
        section = config.get(table)
        if isinstance(section, Mapping) and isinstance(section.get(key), str):
            yield section[key]


def held_values(environ: Mapping[str, str], config: Mapping[str, object] | None = None) -> set[str]:
    """The secret values this process holds, by the rules above."""
    named = named_variables(config) if config is not None else set()
    whole = [v for k, v in environ.items() if v and (is_secret_name(k) or k in named)]
    urls: Iterable[str] = [
        *(environ[k] for k in URL_VARIABLES if environ.get(k)),
        *(_config_urls(config) if config is not None else ()),
        *(v for v in whole if "://" in v),
    ]
    return {*whole, *(c for url in urls for c in url_credentials(url) if c)}
