"""Where the state is kept when it is not the state dir's files: a ``postgresql://`` URL
(``[storage] url``, or ``$ORCHESTRATOR_STORAGE_URL``), which may carry a password.

Like the broker's URL it is never shown with its credentials (``MaskedUrl``): a config
that is printed, logged or written to a state file cannot leak it. Better still, keep the
password out of the URL altogether: libpq reads ``$PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

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
