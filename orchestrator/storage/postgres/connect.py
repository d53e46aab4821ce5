"""The one door to PostgreSQL: a connection from a ``postgresql://`` URL, with a bounded
connect and the driver's errors translated.

psycopg is imported inside ``connect`` only, so importing this module (and the package's
face) costs nothing where the ``postgres`` extra is not installed. A connection that
cannot be made is ``PostgresUnavailable``, naming the server by its masked URL: no
message, and no exception it chains, carries the password.

The password, when the URL holds none, is handed to libpq as a connection parameter:
the one given, else ``$PGPASSWORD`` from our own copy of the environment (``os.environ``).
libpq would read ``$PGPASSWORD`` with ``getenv``, from the process's exec-time block,
where the key shield (``execution/key_shield.py``) has blanked it so that no other
process reads it in /proc/PID/environ; the shield keeps doing so (issue 40). Without
either, libpq reads a pgpass file (``$PGPASSFILE``, else ``~/.pgpass``) itself.
``$PGSSLKEY`` (the client key's path; its name alone gets it blanked) is handed over the
same way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.domain.broker_url import mask_url, scrub
from orchestrator.domain.errors import EXIT_LOCKED, OrchestratorError
from orchestrator.domain.storage_url import url_password

if TYPE_CHECKING:
    import psycopg

# Long enough for a loaded server, short enough that a dead one is reported while the
# caller can still act. libpq counts whole seconds (and treats under 2 as 2).
DEFAULT_CONNECT_TIMEOUT_S = 5.0
APPLICATION_NAME = "orchestrator"


class PostgresUnavailable(OrchestratorError):
    """PostgreSQL did not accept a connection (unreachable, refused, wrong password, a
    malformed URL); the message names it by its masked URL. ``reason`` is what went wrong
    alone (scrubbed), for a caller that says more around it. Try again later."""

    exit_code = EXIT_LOCKED

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


def connect(
    url: str,
    *,
    timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    password: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> psycopg.Connection[Any]:
    """A connection to the database ``url`` names (not in autocommit: the caller's
    ``with conn.transaction():`` blocks decide what commits together); ``password`` (else
    ``$PGPASSWORD`` in ``environ``, ``os.environ`` by default) when the URL holds none.

    Raises ``PostgresUnavailable`` (password masked) when none can be made within
    ``timeout_s``, or when psycopg is not installed."""
    try:
        import psycopg
    except ImportError:
        raise PostgresUnavailable(
            f"cannot reach PostgreSQL at {mask_url(url)}: psycopg is not installed "
            "(pip install 'ticket-orchestrator[postgres]')",
            "psycopg is not installed",
        ) from None
    env = os.environ if environ is None else environ
    given = _password(url, password, env)
    try:
        return psycopg.connect(
            url,
            connect_timeout=max(2, math.ceil(timeout_s)),
            application_name=APPLICATION_NAME,
            # None: left out (psycopg drops None parameters).
            password=given,
            # $PGSSLKEY (a path) is blanked by the shield too: its name says KEY.
            sslkey=None if "sslkey=" in url else env.get("PGSSLKEY") or None,
        )
    except (psycopg.Error, ValueError) as exc:
        reason = scrub(str(exc).strip(), url) or type(exc).__name__
        if given:
            reason = reason.replace(given, "***")
    # Raised outside the handler: the driver's error, which may quote the URL, is not chained.
    raise PostgresUnavailable(f"cannot reach PostgreSQL at {mask_url(url)}: {reason}", reason)


def _password(url: str, password: str | None, environ: Mapping[str, str]) -> str | None:
    if url_password(url) is not None:
        return None  # the URL's own, which libpq reads from it
    return password or environ.get("PGPASSWORD") or None
