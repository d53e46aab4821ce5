"""Who the commits of a run are by, when git itself does not say: the ``[git]`` table's
author, handed to the clone stage through two environment variables, else the
orchestrator's fallback identity (``stages/clone.py``). Whatever git config the clone sees
(the user's global or system config, the clone's own) wins over both, as it always did.

Named ``ORCHESTRATOR_*``: a stage drops inherited ``ORCH_*`` values, and these are set by
``app/services.build_services`` from the config (a shell may set them too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Used only where no identity is configured at any git level, nor in the config's [git]
# table, so that `git am` and `git commit` in later stages work on a machine that has never
# been set up for git.
FALLBACK_IDENTITY: Final = {"name": "orchestrator", "email": "orchestrator@localhost"}
AUTHOR_NAME_ENV: Final = "ORCHESTRATOR_GIT_AUTHOR_NAME"
AUTHOR_EMAIL_ENV: Final = "ORCHESTRATOR_GIT_AUTHOR_EMAIL"
# git's key under ``user.`` → the variable that carries the configured value.
IDENTITY_ENV: Final = {"name": AUTHOR_NAME_ENV, "email": AUTHOR_EMAIL_ENV}


def identity_environ(name: str | None, email: str | None) -> dict[str, str]:
    """The variables that carry a configured identity (only the parts configured)."""
    values = {"name": name, "email": email}
    return {IDENTITY_ENV[key]: value for key, value in values.items() if value}


def configured_identity(environ: Mapping[str, str]) -> dict[str, str]:
    """``user.*`` key → value, for the parts of the identity the environment carries."""
    return {key: environ[var] for key, var in IDENTITY_ENV.items() if environ.get(var)}
