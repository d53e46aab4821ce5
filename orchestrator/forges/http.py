"""HTTP for the forges, through the standard library: the core process never imports
``httpx2`` (tests/test_boundaries.py), so the issue intake speaks urllib.

* ``UrllibClient`` implements ``forges._rest.HttpClient``: an error status is a
  response, not an exception; a network failure is an ``OSError``. It follows no
  redirect: urllib would carry the ``Authorization`` header to whatever host a 3xx
  names, so a 3xx is answered to the caller as it came.
* ``send_with_backoff`` retries a rate-limited (429, or 403 with the rate limit spent or
  a ``Retry-After``) answer a bounded number of times, waiting what the server asked
  (``Retry-After``, ``x-ratelimit-reset``), never more than ``max_wait_s`` in all; the
  sleep is injected so tests never sleep. A failing answer (5xx) or a dropped connection
  is retried the same way only for an idempotent request (a GET, a PUT): the server may
  have acted on a POST it then failed to answer, and sending it again could make a
  second comment. A rate-limited answer says the server did not act: always retried.
* ``fetch_pages`` follows ``Link: <…>; rel="next"`` for a bounded number of pages, and
  only to the origin it started from (the token goes with every page).

Tokens live in the headers the caller passes; ``scrub`` takes them out of any text
before it reaches a message.
"""

from __future__ import annotations

import functools
import http.client
import json as jsonlib
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from orchestrator.forges._rest import (
    MAX_TRIES,
    MAX_WAIT_S,
    Clock,
    HttpClient,
    HttpResponse,
    Sleep,
    rate_limited,
    send_with_backoff,
    wait_asked,
)

__all__ = [
    "MAX_TRIES",
    "MAX_WAIT_S",
    "Clock",
    "Headers",
    "PagingError",
    "Response",
    "Sleep",
    "UrllibClient",
    "fetch_pages",
    "next_link",
    "rate_limited",
    "scrub",
    "send_with_backoff",
    "wait_asked",
]

TIMEOUT_S = 30.0
# GitHub caps an issue body at 65536 characters: a page of 100 is a few MB at most.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_PAGES = 50


class Headers(Mapping[str, str]):
    """Response headers, looked up without regard to case (as HTTP means them)."""

    def __init__(self, pairs: Mapping[str, str] | list[tuple[str, str]]) -> None:
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        self._by_key: dict[str, str] = {}
        for key, value in items:
            lowered = key.lower()
            # Repeated headers (Link may be) are joined, as RFC 9110 allows.
            self._by_key[lowered] = (
                f"{self._by_key[lowered]}, {value}" if lowered in self._by_key else value
            )

    def __getitem__(self, key: str) -> str:
        return self._by_key[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)


class Response:
    """One answer: its status, headers and text."""

    __slots__ = ("headers", "status_code", "text")

    def __init__(self, status_code: int, headers: Headers, text: str) -> None:
        self.status_code = status_code
        self.headers = headers
        self.text = text

    def json(self) -> Any:
        return jsonlib.loads(self.text)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx reaches the caller as an HTTPError: a response


class UrllibClient:
    """``HttpClient`` over urllib. A relative ``url`` is joined to ``base_url``."""

    def __init__(self, base_url: str = "", *, timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect())

    def __repr__(self) -> str:
        return f"UrllibClient(base_url={self.base_url!r})"

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> Response:
        full = url if "://" in url else f"{self.base_url}/{url.lstrip('/')}"
        if params:
            joiner = "&" if urllib.parse.urlsplit(full).query else "?"
            full += joiner + urllib.parse.urlencode(params)
        data = None
        sent = dict(headers or {})
        if json is not None:
            data = jsonlib.dumps(json).encode()
            sent.setdefault("Content-Type", "application/json")
        request = urllib.request.Request(full, data=data, headers=sent, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                return _response(answer.status, answer.headers.items(), answer)
        except urllib.error.HTTPError as exc:  # a status the server chose: an answer
            with exc:
                return _response(exc.code, exc.headers.items(), exc)
        except http.client.HTTPException as exc:  # a broken answer: the network's fault
            raise OSError(f"{type(exc).__name__}: {exc}") from None


def _response(status: int, headers: list[tuple[str, str]], body: Any) -> Response:
    raw = body.read(MAX_RESPONSE_BYTES + 1)
    if len(raw) > MAX_RESPONSE_BYTES:
        raise OSError(f"the answer is larger than {MAX_RESPONSE_BYTES} bytes")
    return Response(status, Headers(headers), raw.decode("utf-8", errors="replace"))


def scrub(text: str, *secrets: str) -> str:
    """``text`` on one line, with every secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return " ".join(text.split())


_NEXT = re.compile(r'<([^>]*)>\s*;[^,]*\brel="?next"?', re.IGNORECASE)


def next_link(headers: Mapping[str, str]) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, or None."""
    link = Headers(dict(headers)).get("link", "")
    match = _NEXT.search(link)
    return match.group(1) if match else None


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class PagingError(Exception):
    """The pages did not end where they should: too many, or a next page elsewhere."""


def fetch_pages(
    client: HttpClient,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    max_pages: int = MAX_PAGES,
    network_errors: tuple[type[BaseException], ...] = (),
    max_wait_s: float = MAX_WAIT_S,
) -> Iterator[HttpResponse]:
    """Each page's answer, from ``url`` (absolute) along ``Link: rel="next"``, each sent
    with back-off (a GET: a 5xx and ``network_errors`` are retried too). A non-200 answer
    is yielded and ends the walk (the caller reports it); a network error still raised
    after the retries is raised. Raises ``PagingError`` past ``max_pages`` or when a next
    page is on another origin."""
    origin = _origin(url)
    page_url, page_params = url, params
    for _ in range(max_pages):
        response = send_with_backoff(
            functools.partial(client.request, "GET", page_url, params=page_params, headers=headers),
            sleep=sleep,
            clock=clock,
            network_errors=network_errors,
            max_wait_s=max_wait_s,
        )
        yield response
        following = next_link(response.headers) if response.status_code == 200 else None
        if following is None:
            return
        if _origin(following) != origin:
            raise PagingError("the next page is on another host; not sending the token there")
        # The next link carries the query (page, per_page, filters) itself.
        page_url, page_params = following, None
    raise PagingError(f"more than {max_pages} pages")
