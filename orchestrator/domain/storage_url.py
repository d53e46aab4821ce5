"""Where the state is kept when it is not the state dir's files: a ``postgresql://`` URL
(``[storage] url``, or ``$ORCHESTRATOR_STORAGE_URL``), which may carry a password.

Like the broker's URL it is never shown with its credentials (``MaskedUrl``): a config
that is printed, logged or written to a state file cannot leak it. Better still, keep the
password out of the URL altogether: ``$PGPASSWORD`` (read by ``storage/postgres/connect``
from our own copy of the environment: the key shield blanks it where libpq would read it)
or a pgpass file (``$PGPASSFILE``, else ``~/.pgpass``, which libpq reads itself).

A URL given on the command line (``storage export --to``, ``import --from``) may not hold
a password at all (issue 40): every user of the machine reads a command line (``ps``,
``/proc/PID/cmdline``). ``command_line_password_problem`` says so and what to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from pydantic import PlainSerializer, PlainValidator

from orchestrator.domain import keys
from orchestrator.domain.broker_url import MaskedUrl, mask_url, masked_text, server_url_problem
from orchestrator.domain.errors import ConfigError

STORAGE_URL_ENV = keys.STORAGE_URL_ENV
SCHEMES = ("postgresql", "postgres")
EXPECTED = "expected postgresql://[user[:password]@]host[:port]/database[?options]"


def storage_url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable ``postgresql://`` URL (naming it masked), or None."""
    problem, parts = server_url_problem(
        url, schemes=SCHEMES, kind="postgresql://", expected=EXPECTED
    )
    if parts is None:
        return problem
    if not parts.path.removeprefix("/"):
        return f"{mask_url(url)!r} names no database ({EXPECTED})"
    return None


class StorageUrl(MaskedUrl):
    """A validated ``postgresql://`` URL whose every rendering is masked."""

    __slots__ = ()
    expected = "a postgresql:// URL"
    problem = staticmethod(storage_url_problem)


# The config field: validated from a string (an error quotes only the masked URL), and
# serialised masked, so a dumped config carries no password.
ConfiguredStorageUrl = Annotated[
    StorageUrl,
    PlainValidator(StorageUrl.parse),
    PlainSerializer(masked_text, return_type=str, when_used="always"),
]


def storage_url_from(
    configured: StorageUrl | None, environ: Mapping[str, str]
) -> StorageUrl | None:
    """Where the state is kept: ``$ORCHESTRATOR_STORAGE_URL`` when set, else the config's
    ``[storage] url``; None: the state dir's files (the default)."""
    from_env = environ.get(STORAGE_URL_ENV, "")
    if from_env:
        try:
            return StorageUrl(from_env)
        except ValueError as exc:
            raise ConfigError(f"config error: ${STORAGE_URL_ENV}: {exc}") from None
    return configured


DEFAULT_PORT = 5432
PASSWORD_SOURCES = (
    "$PGPASSWORD",
    f"the password in ${STORAGE_URL_ENV} (same host and port)",
    "a pgpass file ($PGPASSFILE, else ~/.pgpass)",
    "the prompt (on a terminal)",
)


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is no number)
    except ValueError:
        return None
    return parts


def url_password(url: str) -> str | None:
    """The password ``url`` holds (percent-decoded), before the host or as libpq's
    ``?password=`` parameter, or None."""
    parts = _split(url)
    if parts is None:
        return None
    if parts.password:
        return unquote(parts.password)
    given = parse_qs(parts.query).get("password", [])
    return next((value for value in given if value), None)


def same_server(url: str, other: str) -> bool:
    """Whether both URLs name one server: the same host (any case) and port (5432 unsaid)."""
    first, second = _split(url), _split(other)
    if first is None or second is None or not first.hostname:
        return False
    return (first.hostname.lower(), first.port or DEFAULT_PORT) == (
        (second.hostname or "").lower(),
        second.port or DEFAULT_PORT,
    )


def command_line_password_problem(option: str, url: StorageUrl) -> str | None:
    """Why ``url``, given as ``option`` on the command line, is refused (it holds a
    password, which every user of the machine could read there), or None."""
    if url_password(url.reveal()) is None:
        return None
    return (
        f"{option}: {url.masked} holds a password, and a command line is readable by every "
        "user of this machine (ps, /proc/PID/cmdline); leave it out of the URL and give it "
        f"as {', '.join(PASSWORD_SOURCES[:-1])} or at {PASSWORD_SOURCES[-1]}"
    )


def password_for(url: StorageUrl, environ: Mapping[str, str]) -> str | None:
    """The password to connect to ``url`` with, when it holds none: ``$PGPASSWORD``, else
    the one in ``$ORCHESTRATOR_STORAGE_URL`` when that names the same server; None: libpq's
    own pgpass file, or the prompt."""
    if url_password(url.reveal()) is not None:
        return None  # the URL's own (from the environment or the config), libpq reads it
    if environ.get("PGPASSWORD"):
        return environ["PGPASSWORD"]
    configured = environ.get(STORAGE_URL_ENV, "")
    if configured and same_server(configured, url.reveal()):
        return url_password(configured)
    return None
