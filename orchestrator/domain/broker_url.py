"""The coordination store's address: a ``redis://`` URL that may carry a password.

A ``BrokerUrl`` never shows its credentials: ``str()``, ``repr()`` and pydantic's
serialisation all give the masked form (``redis://:***@host:6379/0``), so a config that
is printed, logged or written to a state file cannot leak it. Only the client that
connects asks for the real text (``reveal()``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from pydantic import GetCoreSchemaHandler, PlainSerializer, PlainValidator

from orchestrator.domain import keys
from orchestrator.domain.errors import ConfigError

BROKER_URL_ENV = keys.BROKER_URL_ENV
SCHEMES = ("redis", "rediss")
MAX_URL_LENGTH = 2048
MASK = "***"
# A user name is shown only when it is plainly a name; anything else in the user-info part
# (``redis://SECRET@host`` is read by some clients as the password) is masked whole.
_PLAIN_USER = re.compile(r"[A-Za-z0-9._-]{0,64}")
_SECRET_PARAM = re.compile(r"pass|secret|token|auth|key|cred", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: the password (and a user name
    that is not plainly a name) and the values of password-like query parameters.

    Conservative on malformed input: everything up to the last ``@`` is treated as
    credentials, so a password holding a raw ``/``, ``?`` or ``#`` is masked too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _password = rest[:at].partition(":")
        shown = f"{user}:{MASK}" if colon and _PLAIN_USER.fullmatch(user) else MASK
        rest = f"{shown}@{rest[at + 1 :]}"
    base, question, query = rest.partition("?")
    if question:
        fragment = ""
        if "#" in query:
            query, fragment = query.split("#", 1)
            fragment = "#" + fragment
        params = []
        for part in query.split("&"):
            name, eq, _value = part.partition("=")
            params.append(f"{name}={MASK}" if eq and _SECRET_PARAM.search(name) else part)
        rest = f"{base}?{'&'.join(params)}{fragment}"
    return f"{scheme}{sep}{rest}"


def secrets_of(url: str) -> tuple[str, ...]:
    """The credential strings in ``url`` (raw and percent-decoded), longest first: what
    :func:`scrub` removes from a foreign error message that might quote them."""
    found: set[str] = set()
    rest = url.partition("://")[2] or url
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        user, colon, password = userinfo.partition(":")
        for value in (password, userinfo) if colon else (userinfo,):
            found.update({value, unquote(value)})
        if colon and not _PLAIN_USER.fullmatch(user):
            found.update({user, unquote(user)})
    for name, value in parse_qsl(rest.partition("?")[2], keep_blank_values=True):
        if _SECRET_PARAM.search(name):
            found.add(value)
    return tuple(sorted((s for s in found if len(s) >= 3), key=len, reverse=True))


def scrub(text: str, url: str) -> str:
    """``text`` (an error from a client library) with ``url`` and its credentials masked."""
    text = text.replace(url, mask_url(url))
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
    return text


def server_url_problem(
    url: str, *, schemes: tuple[str, ...], kind: str, expected: str
) -> tuple[str | None, SplitResult | None]:
    """What every server URL must be (named masked): not too long, no blanks, parsable,
    of one of ``schemes``, naming a host and a real port. (why not, None), or (None, its
    parts) for the caller's own checks of the rest."""
    shown = mask_url(url)
    if len(url) > MAX_URL_LENGTH:
        return f"longer than {MAX_URL_LENGTH} characters", None
    if not url or any(c.isspace() or not c.isprintable() for c in url):
        return f"{shown!r} is empty or contains blanks or control characters ({expected})", None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid URL: {mask_url(str(exc))} ({expected})", None
    if parts.scheme not in schemes:
        return f"{shown!r} is not a {kind} URL ({expected})", None
    if not parts.hostname:
        return f"{shown!r} names no host ({expected})", None
    if port == 0:
        return f"{shown!r}: port 0 is not a port", None
    return None, parts


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable ``redis://`` URL (naming it masked), or None."""
    expected = "expected redis://[[user]:password@]host[:port][/db] or rediss://…"
    problem, parts = server_url_problem(url, schemes=SCHEMES, kind="redis", expected=expected)
    if parts is None:
        return problem
    database = parts.path.removeprefix("/")
    if database and not (database.isdigit() and len(database) <= 6):
        return f"{mask_url(url)!r}: the path must be a database number, like /0"
    return None


class MaskedUrl:
    """A validated URL whose every rendering is masked; a subclass says which URLs it
    takes (``problem``) and how it is named in errors (``expected``)."""

    __slots__ = ("_url",)
    expected = "a URL"

    def __init__(self, url: str) -> None:
        problem = self.problem(url)
        if problem is not None:
            raise ValueError(problem)
        self._url = url

    @staticmethod
    def problem(url: str) -> str | None:
        """Why ``url`` is not one of this kind's URLs (naming it masked), or None."""
        raise NotImplementedError

    def reveal(self) -> str:
        """The URL with its credentials: for the client that connects, nothing else."""
        return self._url

    @property
    def masked(self) -> str:
        return mask_url(self._url)

    def scrub(self, text: str) -> str:
        return scrub(text, self._url)

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.masked!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MaskedUrl) and type(other) is type(self) and other._url == self._url
        )

    def __hash__(self) -> int:
        return hash(self._url)

    @classmethod
    def parse(cls, value: object) -> Any:
        """From config (a string) or an already validated URL. The error never quotes the
        value as given: only its masked form."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise ValueError(f"expected {cls.expected} as a string, not {type(value).__name__}")
        return cls(value)

    @classmethod
    def __get_pydantic_core_schema__(cls, _source: type[Any], handler: GetCoreSchemaHandler) -> Any:
        """As text, for the schema; the ``Configured…`` annotation says how it is
        validated and written (masked)."""
        return handler(str)


class BrokerUrl(MaskedUrl):
    """A validated ``redis://`` URL whose every rendering is masked."""

    __slots__ = ()
    expected = "a redis:// URL"
    problem = staticmethod(url_problem)


def masked_text(url: MaskedUrl) -> str:
    return url.masked


# The config field: validated from a string (an error quotes only the masked URL), and
# serialised masked, so a dumped config carries no password.
ConfiguredBrokerUrl = Annotated[
    BrokerUrl,
    PlainValidator(BrokerUrl.parse),
    PlainSerializer(masked_text, return_type=str, when_used="always"),
]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host name, brackets stripped) is this machine's loopback:
    ``localhost`` or an address in 127.0.0.0/8 or ::1. A name that only resolves there is
    not: what it resolves to can change."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


AUTH_FIX = (
    "put a password in the URL (redis://:PASSWORD@host:6379/0, and requirepass on the "
    "server) or use TLS (rediss://…)"
)


def authentication_problem(url: MaskedUrl, where: str) -> str | None:
    """Why the fleet may not use ``url`` as its broker, or None (issue 40): a broker off
    this machine must authenticate, by a password or TLS, since whoever can write to it
    can queue work for every worker. A loopback broker may go without."""
    parts = urlsplit(url.reveal())
    if parts.scheme == "rediss" or parts.password or is_loopback_host(parts.hostname or ""):
        return None
    return (
        f"{where}: {url.masked} is a broker off this machine with neither a password nor "
        f"TLS: anyone who can reach it could queue work for the fleet; {AUTH_FIX}"
    )


def broker_source(environ: Mapping[str, str], config_path: object) -> str:
    """Where the broker URL in use was read: the variable, or the config key and file."""
    if environ.get(BROKER_URL_ENV, ""):
        return f"${BROKER_URL_ENV}"
    return f"{config_path}: distributed.broker_url"


def broker_url_from(
    configured: BrokerUrl | None,
    environ: Mapping[str, str],
    config_path: object,
    *,
    require_auth: bool = True,
) -> BrokerUrl:
    """The broker to use: ``$ORCHESTRATOR_BROKER_URL`` when set, else the config's
    ``[distributed] broker_url``. A ConfigError names where a bad or missing value is, or
    (``require_auth``) where a broker off this machine goes without a password or TLS."""
    from_env = environ.get(BROKER_URL_ENV, "")
    if from_env:
        try:
            url = BrokerUrl(from_env)
        except ValueError as exc:
            raise ConfigError(f"config error: ${BROKER_URL_ENV}: {exc}") from None
    elif configured is None:
        raise ConfigError(
            f"config error: {config_path}: distributed.broker_url: not set (and "
            f"${BROKER_URL_ENV} is empty); a distributed batch needs a redis:// URL"
        )
    else:
        url = configured
    problem = authentication_problem(url, broker_source(environ, config_path))
    if require_auth and problem is not None:
        raise ConfigError(f"config error: {problem}")
    return url
