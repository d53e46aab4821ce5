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

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, model_validator

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

_HOST_NAME: Final = re.compile(
    r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
)
# NAT64's well-known prefix: its last 32 bits are an IPv4 address a gateway reaches.
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def allowed_entry(entry: str) -> tuple[str, int | None]:
    """An ``allow_private`` entry as (host, port or None): ``host``, ``host:port``, an
    IPv4 address with or without ``:port``, an IPv6 address bare or as ``[addr]:port``.
    Raises ValueError saying what is wrong."""
    text = entry.strip().lower()
    host, port = text, None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r} is not [IPv6]:port")
        port = _port(entry, rest[1:]) if rest else None
    elif text.count(":") == 1:
        host, _, digits = text.partition(":")
        port = _port(entry, digits)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_NAME.fullmatch(host):
            raise ValueError(
                f"{entry!r} is not a host name, an IP address, or either with ':port'"
            ) from None
    return host, port


def _port(entry: str, digits: str) -> int:
    if not digits.isdigit() or not 1 <= int(digits) <= 65535:
        raise ValueError(f"{entry!r} has no port from 1 to 65535 after its ':'")
    return int(digits)


def _checked_entry(entry: str) -> str:
    allowed_entry(entry)
    return entry


AllowedHost = Annotated[StrictStr, Field(max_length=300), AfterValidator(_checked_entry)]


def public_address(text: str) -> bool:
    """Whether ``text`` (an IP address) is a public unicast address — the only kind a
    target is sent to unless it is allowed by name. Loopback, link-local, private,
    shared, unspecified (0.0.0.0, ::), documentation and multicast addresses are not,
    nor an IPv6 address carrying one of those as IPv4 (mapped, compatible, 6to4, NAT64,
    Teredo)."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if address.is_multicast or not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        inner = [address.ipv4_mapped, address.sixtofour]
        if address.teredo:
            inner.append(address.teredo[1])
        if address in _NAT64 or int(address) >> 32 == 0:
            inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        return all(public_address(str(v4)) for v4 in inner if v4 is not None)
    return True


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
    # Per try, all of it (resolving, connecting, sending, the answer); three tries at
    # most (``app/notify.py``).
    timeout_s: Annotated[float, Field(strict=True, gt=0.0, le=60.0)] = 5.0
    # The hosts (``host`` or ``host:port``, as the URL or ``smtp_host`` names them) that
    # may resolve to a loopback, link-local or private address; any other target that
    # does is refused before a connection is tried.
    allow_private: Annotated[tuple[AllowedHost, ...], Field(max_length=32)] = ()

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

    def allows_private(self, host: str, port: int) -> bool:
        """Whether ``allow_private`` names ``host`` (as written in the URL or
        ``smtp_host``), on any port or on ``port``."""
        name = host.strip("[]").lower()
        for entry in self.allow_private:
            allowed, allowed_port = allowed_entry(entry)
            if allowed == name and allowed_port in (None, port):
                return True
        return False
