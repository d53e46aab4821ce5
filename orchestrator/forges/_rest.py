"""What the REST forges (GitHub, GitLab) share: the HTTP client they are handed, one
request with the token in its headers only, and a refusal turned into a ``ForgeError`` of
one line, free of the token.

The client is injected (``httpx2.Client`` in a stage, ``forges.http.UrllibClient`` in
the core process, a fake in tests); this module imports neither. Its transport errors
are named by the caller (``network_errors``) and become ``ForgeError(kind="outage")``.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Protocol, TypedDict

from orchestrator.forges.base import ForgeError, OpensIdempotently

Sleep = Callable[[float], None]
Clock = Callable[[], float]
MAX_TRIES = 3
# How long one request waits out rate limits in all, unless the caller says (the open-pr
# stage is told ``[recovery] forge_max_wait_s``): past it, the next batch asks.
MAX_WAIT_S = 60.0

# Methods that do once what they do twice (RFC 9110 9.2.2): safe to send again after a
# 5xx or a dropped connection.
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class HttpResponse(Protocol):
    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


class HttpClient(Protocol):
    """The slice of ``httpx2.Client`` the forges use."""

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> HttpResponse: ...


# --- rate limits (issue 43) -------------------------------------------------------------
# GitHub: a primary limit is 403 (or 429) with ``x-ratelimit-remaining: 0`` and the epoch
# it resets at in ``x-ratelimit-reset``; a secondary limit is 403 or 429 with
# ``Retry-After`` (seconds) and a body saying "secondary rate limit". GitLab: 429 with
# ``Retry-After`` and ``RateLimit-Reset`` (an epoch). Each is the server saying it did
# not act: always safe to send again, after the wait it asks for.
_RATE_WORDS = re.compile(r"rate[ -]?limit", re.IGNORECASE)
# A wait asked for past this is read as "not in this batch" (a year says nothing more).
FAR_S = 366 * 24 * 3600.0


def header(response: HttpResponse, name: str) -> str:
    """The header ``name`` of ``response``, looked up without regard to case; '' if none."""
    headers = response.headers
    value = headers.get(name) if hasattr(headers, "get") else None
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), "")
    return str(value).strip()


def rate_limited(response: HttpResponse) -> bool:
    """429, or a 403 that says a rate limit is spent: by its headers (``Retry-After``, a
    remaining count of 0) or its words (GitHub's "secondary rate limit"). Any other 403
    is the token not being allowed."""
    status = response.status_code
    if status == 429:
        return True
    if status != 403:
        return False
    if (
        header(response, "x-ratelimit-remaining") == "0"
        or header(response, "ratelimit-remaining") == "0"
        or header(response, "retry-after")
    ):
        return True
    return bool(_RATE_WORDS.search(_said(response)))


def _said(response: HttpResponse) -> str:
    message = json_fields(response).get("message")
    return message if isinstance(message, str) else ""


def _number(text: str) -> float | None:
    """A finite number of seconds or an epoch, or None (garbage, NaN, infinity)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _retry_after(text: str, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: delay-seconds or an HTTP-date (RFC 9110
    10.2.3); None when it is neither. A negative delay or a date past is 0."""
    if not text:
        return None
    seconds = _number(text)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when.timestamp() - now, 0.0)


def wait_asked(response: HttpResponse, attempt: int, now: float) -> float:
    """Seconds the server asked us to wait before sending again: ``Retry-After``, else the
    reset epoch of ``x-ratelimit-reset`` / ``ratelimit-reset`` (plus a second: the limit
    turns at the end of that second), else 1, 2, 4… by ``attempt``. Never negative, at
    most ``FAR_S``; what cannot be read falls back to the doubling."""
    asked = _retry_after(header(response, "retry-after"), now)
    if asked is None:
        for key in ("x-ratelimit-reset", "ratelimit-reset"):
            reset = _number(header(response, key))
            if reset is not None:
                asked = max(reset - now, 0.0) + 1.0
                break
    if asked is None:
        asked = float(2**attempt)
    return min(asked, FAR_S)


def retry_at(response: HttpResponse, now: float) -> float:
    """The epoch at which a rate-limited answer says to ask again."""
    return now + wait_asked(response, 0, now)


def when(epoch: float) -> str:
    """An epoch as the guide and ``show`` write times: ``2026-12-07T11:00:00Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def send_with_backoff(
    send: Callable[[], HttpResponse],
    *,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    tries: int = MAX_TRIES,
    max_wait_s: float = MAX_WAIT_S,
    idempotent: bool = True,
    network_errors: tuple[type[BaseException], ...] = (),
) -> HttpResponse:
    """``send()`` again while the answer is rate-limited, up to ``tries`` sends and
    ``max_wait_s`` of waiting in all; when ``idempotent``, also while it is a 5xx or
    ``send`` raises one of ``network_errors``. A wait longer than what is left of the
    budget is not started: the last answer is returned for the caller to report (the
    last network error raised)."""
    waited = 0.0
    for attempt in range(tries):
        try:
            response = send()
        except network_errors:
            if not idempotent or attempt == tries - 1:
                raise
            wait = float(2**attempt)
            if waited + wait > max_wait_s:
                raise
            sleep(wait)
            waited += wait
            continue
        failing = idempotent and response.status_code >= 500
        if not (rate_limited(response) or failing):
            return response
        if attempt == tries - 1:
            break
        wait = wait_asked(response, attempt, clock())
        if waited + wait > max_wait_s:
            break
        sleep(wait)
        waited += wait
    return response


def json_body(response: HttpResponse, forge: str) -> Any:
    """The answer's JSON; an answer that is none is the forge failing (``outage``)."""
    try:
        return response.json()
    except ValueError:
        raise ForgeError(
            "outage", f"{forge} answered {response.status_code} with a body that is not JSON"
        ) from None


def without_userinfo(url: str) -> str:
    """``https://user:secret@host/…`` → ``https://host/…``: a URL in a message keeps no key."""
    return re.sub(r"^(\w+://)[^@/]+@", r"\1", url)


def json_fields(response: HttpResponse) -> dict[str, Any]:
    """The answer's JSON object, or {} (no JSON, or not an object): where a refusal's
    words are read from."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class Retrying(TypedDict, total=False):
    """How a forge sends a request again (``send_with_backoff``), as a subclass passes it on."""

    network_errors: tuple[type[BaseException], ...]
    sleep: Sleep
    clock: Clock
    max_wait_s: float


class RestForge(OpensIdempotently):
    """A forge over REST, one token. A subclass names itself (``FORGE``, ``TOKEN_ENV``)
    and is built with the ``subject`` it serves (a repository, a project), the headers
    every request carries (the token is in them, and nowhere else) and how to read the
    forge's words in an answer (``message``)."""

    __slots__ = ("_client", "_clock", "_headers", "_max_wait_s", "_message", "_network_errors",
                 "_sleep", "_token", "subject")  # fmt: skip
    FORGE: ClassVar[str]
    TOKEN_ENV: ClassVar[str]
    LOGIN: ClassVar[str]  # the field of ``GET /user`` that names the account
    _api: str  # the API's root, before every path ('': the client's base URL is it)

    def __init__(
        self,
        client: HttpClient,
        token: str,
        *,
        subject: str,
        headers: Callable[[str], dict[str, str]],
        message: Callable[[HttpResponse], str],
        network_errors: tuple[type[BaseException], ...] = (OSError,),
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        if not token:
            raise ValueError(f"a {self.FORGE} token is required")
        self._sleep, self._clock, self._max_wait_s = sleep, clock, max_wait_s
        self._client = client
        self._token = token
        self._headers = headers(token)
        self._network_errors = network_errors
        self.subject = subject
        self._message = message

    def _retrying(self, send: Callable[[], HttpResponse], *, idempotent: bool) -> HttpResponse:
        """``send()``, a rate limit waited out (every request: the server did not act),
        a 5xx or a dropped connection sent again only when ``idempotent``: after a POST
        the forge may have acted (a second comment, a second pull request)."""
        return send_with_backoff(send, sleep=self._sleep, clock=self._clock,
                                 max_wait_s=self._max_wait_s, idempotent=idempotent,
                                 network_errors=self._network_errors)  # fmt: skip

    def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> HttpResponse:
        send = functools.partial(
            self._client.request, method, url, params=params, headers=self._headers, json=json
        )
        try:
            return self._retrying(send, idempotent=method.upper() in IDEMPOTENT)
        except self._network_errors as exc:
            raise self._unreachable(exc) from None

    def own_login(self) -> str:
        """The name of the account the token belongs to (``GET /user``, its ``LOGIN``)."""
        response = self._send("GET", f"{self._api}/user")
        if response.status_code != 200:
            raise self._error(response, "cannot read whose token this is")
        login = self._object(response, "the user").get(self.LOGIN)
        if not isinstance(login, str) or not login:
            raise ForgeError("outage", f"{self.FORGE}'s user has no {self.LOGIN}")
        return login

    def _listed(self, response: HttpResponse, doing: str) -> list[dict[str, Any]]:
        """The objects of a list answer; a refusal raised, a non-list an ``outage``."""
        if response.status_code != 200:
            raise self._error(response, doing)
        items = json_body(response, self.FORGE)
        if not isinstance(items, list):
            raise ForgeError("outage", f"{doing}: {self.FORGE} answered a {type(items).__name__}")
        return [item for item in items if isinstance(item, dict)]

    def _object(self, response: HttpResponse, what: str) -> dict[str, Any]:
        """The answer's JSON object; anything else is the forge failing (``outage``)."""
        data = json_body(response, self.FORGE)
        if not isinstance(data, dict):
            raise ForgeError("outage", f"{self.FORGE} answered {what} with no object")
        return data

    def _unreachable(self, exc: BaseException) -> ForgeError:
        # The exception's text is the transport's: scrub it all the same.
        reason = self._scrub(str(exc)) or type(exc).__name__
        return ForgeError("outage", f"cannot reach {self.FORGE}: {reason}")

    def _forbidden_hint(self, response: HttpResponse) -> str:
        """What a 403 may mean beyond "not allowed" (GitHub: a spent rate limit)."""
        return ""

    def _error(self, response: HttpResponse, doing: str) -> ForgeError:
        status = response.status_code
        said = self._scrub(self._message(response))
        said_part = f": {said}" if said else ""
        forge = self.FORGE
        if status == 401:
            return ForgeError(
                "auth", f"{doing}: {forge} rejected the token (401){said_part}; "
                f"check {self.TOKEN_ENV}"
            )  # fmt: skip
        if rate_limited(response):
            # Still limited after the wait this process allows (issue 43): never a
            # refusal of the token, but a time to ask again, for the next batch.
            again = retry_at(response, self._clock())
            return ForgeError(
                "rate_limited",
                f"{doing}: {forge}'s rate limit ({status}){said_part}; it asks to wait "
                f"until {when(again)}, past the {self._max_wait_s:g} s one request may wait",
                retry_at=again,
            )
        if status == 403:
            hint = self._forbidden_hint(response)
            return ForgeError(
                "forbidden", f"{doing}: the token may not do this (403){said_part}{hint}"
            )
        if status == 404:
            return ForgeError(
                "not_found",
                f"{doing}: {self.subject} not found (404), or the token cannot see it",
            )
        if status >= 500:
            return ForgeError("outage", f"{doing}: {forge} is failing ({status}){said_part}")
        return ForgeError("rejected", f"{doing}: {forge} refused it ({status}){said_part}")

    def _scrub(self, text: str) -> str:
        return " ".join(text.replace(self._token, "***").split())
