"""Notifications' configuration (issue 28): the ``[[notify]]`` targets and the events
they may ask for. What a run's event is, and what each kind of target is sent about it,
is ``domain/notices.py``; the sending ``app/notify.py``; the record of what was sent
``storage/notify_outbox.py``.

A target's URL is a secret (a Slack or Teams incoming webhook's path *is* its
credential), so the config names the environment variable that holds it, never the URL;
everything said about a target names the variable (``$SLACK_URL``). Every text a message
carries is redacted and bounded: a halt's detail quotes logs nobody here wrote.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from orchestrator.domain.validation import Frozen, StrictBool, StrictInt, StrictStr


class NotifyEvent(StrEnum):
    AWAITING_APPROVAL = "awaiting-approval"
    NEEDS_HUMAN = "needs-human"
    FAILED = "failed"
    COMPLETED = "completed"


# Like ``[model] api_key_env``: the name of a variable, never its value.
SecretEnv = Annotated[StrictStr, Field(pattern=r"^[A-Z_][A-Z0-9_]{0,63}$")]
Address = Annotated[StrictStr, Field(max_length=256, pattern=r"^[^\s<>@,]+@[^\s<>@,]+$")]
_EMAIL_KEYS = ("smtp_host", "smtp_port", "from_", "to", "username_env", "password_env", "starttls")


class NotifyTarget(Frozen):
    """One ``[[notify]]`` table: where a run's events go, and which events."""

    kind: Literal["webhook", "slack", "teams", "email"]
    events: Annotated[tuple[NotifyEvent, ...], Field(min_length=1, max_length=4)] = tuple(
        NotifyEvent
    )
    url_env: SecretEnv | None = None
    smtp_host: Annotated[StrictStr, Field(min_length=1, max_length=253)] | None = None
    smtp_port: Annotated[StrictInt, Field(ge=1, le=65535)] = 587
    from_: Address | None = Field(default=None, alias="from")
    to: Annotated[tuple[Address, ...], Field(max_length=32)] = ()
    username_env: SecretEnv | None = None
    password_env: SecretEnv | None = None
    starttls: StrictBool = True
    # Per try, per blocking socket operation; three tries at most (``app/notify.py``).
    timeout_s: Annotated[float, Field(strict=True, gt=0.0, le=60.0)] = 5.0

    @model_validator(mode="after")
    def _keys_of_its_kind(self) -> NotifyTarget:
        given = self.model_fields_set
        if self.kind == "email":
            if self.url_env is not None:
                raise ValueError("'url_env' is for webhook, slack and teams targets, not email")
            missing = [k for k in ("smtp_host", "from_", "to") if not getattr(self, k)]
            if missing:
                names = ", ".join(repr(k.rstrip("_")) for k in missing)
                raise ValueError(f"an email target needs {names}")
            return self
        if self.url_env is None:
            raise ValueError(
                f"a {self.kind} target needs 'url_env': the name of the environment "
                "variable holding its URL (the URL itself never goes in the config)"
            )
        stray = [k.rstrip("_") for k in _EMAIL_KEYS if k in given]
        if stray:
            raise ValueError(f"{', '.join(map(repr, stray))} only apply to email targets")
        return self

    @property
    def name(self) -> str:
        """How the target is named in every output: its variable or its addresses."""
        if self.url_env is not None:
            return f"{self.kind} ${self.url_env}"
        return f"email to {', '.join(self.to)}"
