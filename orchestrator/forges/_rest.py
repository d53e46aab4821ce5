"""What the REST forges (GitHub, GitLab) share: the HTTP client they are handed, one
request with the token in its headers only, and a refusal turned into a ``ForgeError`` of
one line, free of the token.

The client is injected (``httpx2.Client`` in a stage, ``forges.http.UrllibClient`` in
the core process, a fake in tests); this module imports neither. Its transport errors
are named by the caller (``network_errors``) and become ``ForgeError(kind="outage")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from orchestrator.forges.base import ForgeError, OpensIdempotently

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


def json_body(response: HttpResponse, forge: str) -> Any:
    """The answer's JSON; an answer that is none is the forge failing (``outage``)."""
    try:
        return response.json()
    except ValueError:
        raise ForgeError(
            "outage", f"{forge} answered {response.status_code} with a body that is not JSON"
        ) from None


def json_fields(response: HttpResponse) -> dict[str, Any]:
    """The answer's JSON object, or {} (no JSON, or not an object): where a refusal's
    words are read from."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class RestForge(OpensIdempotently):
    """A forge over REST, one token. A subclass names itself (``FORGE``, ``TOKEN_ENV``)
    and is built with the ``subject`` it serves (a repository, a project), the headers
    every request carries (the token is in them, and nowhere else) and how to read the
    forge's words in an answer (``message``)."""

    __slots__ = ("_client", "_headers", "_message", "_network_errors", "_token", "subject")
    FORGE: ClassVar[str]
    TOKEN_ENV: ClassVar[str]

    def __init__(
        self,
        client: HttpClient,
        token: str,
        network_errors: tuple[type[BaseException], ...],
        *,
        subject: str,
        headers: Callable[[str], dict[str, str]],
        message: Callable[[HttpResponse], str],
    ) -> None:
        if not token:
            raise ValueError(f"a {self.FORGE} token is required")
        self._client = client
        self._token = token
        self._headers = headers(token)
        self._network_errors = network_errors
        self.subject = subject
        self._message = message

    def _retrying(self, send: Callable[[], HttpResponse], *, idempotent: bool) -> HttpResponse:
        """``send()``; a forge that waits out rate limits says how here. A request that
        is not ``idempotent`` (a POST) must not be sent again after a 5xx or a dropped
        connection: the forge may have acted on it (a second comment)."""
        return send()

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

    def _listed(self, response: HttpResponse, doing: str) -> list[dict[str, Any]]:
        """The objects of a list answer; a refusal raised, a non-list an ``outage``."""
        if response.status_code != 200:
            raise self._error(response, doing)
        items = json_body(response, self.FORGE)
        if not isinstance(items, list):
            raise ForgeError("outage", f"{doing}: {self.FORGE} answered a {type(items).__name__}")
        return [item for item in items if isinstance(item, dict)]

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
        if status == 429:
            return ForgeError("rate_limited", f"{doing}: {forge}'s rate limit (429){said_part}")
        if status >= 500:
            return ForgeError("outage", f"{doing}: {forge} is failing ({status}){said_part}")
        return ForgeError("rejected", f"{doing}: {forge} refused it ({status}){said_part}")

    def _scrub(self, text: str) -> str:
        return " ".join(text.replace(self._token, "***").split())
