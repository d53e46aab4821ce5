"""GitHub issues as a ticket source: every open issue with a label, over REST.

    GET /repos/{owner}/{name}/issues?state=open&labels=L[&assignee=A]
        &per_page=100&sort=created&direction=asc
        → [{"number", "title", "body", "state", "html_url", "user": {"login"},
            "labels": [{"name"}], "assignees": [{"login"}], ["pull_request": {…}]}, …]
        with ``Link: <…&page=2>; rel="next"`` while there are more pages.

GitHub lists pull requests among issues (they carry a ``pull_request`` key): they are
skipped. Rate limits, 5xx and a dropped connection or a timeout (``network_errors``) are
waited out with bounded back-off (``forges.http``): a list is a GET, asked again safely;
what still fails is a ``ForgeError`` whose text never holds the token.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from orchestrator.forges._rest import MAX_WAIT_S, retry_at, when
from orchestrator.forges.base import ForgeError
from orchestrator.forges.github import HttpClient, HttpResponse, request_headers
from orchestrator.forges.http import PagingError, Sleep, fetch_pages, rate_limited, scrub
from orchestrator.forges.issues import ForgeIssue

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class GitHubIssues:
    """The ``IssueTracker`` of one GitHub repository."""

    __slots__ = (
        "_api_url",
        "_client",
        "_max_wait_s",
        "_network_errors",
        "_sleep",
        "_token",
        "repo",
    )

    def __init__(
        self,
        client: HttpClient,
        api_url: str,
        repo: str,
        token: str,
        sleep: Sleep = time.sleep,
        *,
        network_errors: tuple[type[BaseException], ...] = (OSError,),
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        if _REPO.match(repo) is None:
            raise ValueError(f"repository must be 'owner/name' (got {repo!r})")
        self._client = client
        self._api_url = api_url.rstrip("/")
        self._token = token
        self._sleep = sleep
        self._network_errors = network_errors
        # ``[recovery] forge_max_wait_s``: past it, the source's error says when to ask again.
        self._max_wait_s = max_wait_s
        self.repo = repo

    def __repr__(self) -> str:
        return f"GitHubIssues(repo={self.repo!r})"

    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every open issue with ``label`` (all pages), oldest first; no pull requests."""
        owner, name = self.repo.split("/")
        url = f"{self._api_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}/issues"
        params = {
            "state": "open",
            "labels": label,
            "per_page": "100",
            "sort": "created",
            "direction": "asc",
        }
        if assignee:
            params["assignee"] = assignee
        issues: list[ForgeIssue] = []
        try:
            for page in fetch_pages(
                self._client, url, params=params, headers=request_headers(self._token),
                sleep=self._sleep, network_errors=self._network_errors,
                max_wait_s=self._max_wait_s,
            ):  # fmt: skip
                if page.status_code != 200:
                    raise self._error(page)
                items = _json(page)
                if not isinstance(items, list):
                    raise ForgeError("outage", f"GitHub answered the issue list of {self.repo} "
                                     f"with {type(items).__name__}")  # fmt: skip
                issues.extend(issue for item in items if (issue := _issue(item)) is not None)
        except PagingError as exc:
            raise ForgeError("outage", f"issues of {self.repo}: {exc}") from None
        except self._network_errors as exc:
            reason = scrub(str(exc), self._token) or type(exc).__name__
            raise ForgeError("outage", f"cannot reach GitHub: {reason}") from None
        return issues

    def _error(self, response: HttpResponse) -> ForgeError:
        status = response.status_code
        doing = f"cannot list the issues of {self.repo}"
        said = scrub(_message(response), self._token)
        said_part = f": {said}" if said else ""
        if status == 401:
            return ForgeError("auth", f"{doing}: GitHub rejected the token (401){said_part}")
        if rate_limited(response):
            again = retry_at(response, time.time())
            return ForgeError("rate_limited", f"{doing}: GitHub's rate limit ({status}), "
                              f"still spent after waiting; it asks to wait until {when(again)}",
                              retry_at=again)  # fmt: skip
        if status == 403:
            return ForgeError("forbidden", f"{doing}: the token may not read them (403){said_part}")
        if status == 404:
            return ForgeError("not_found", f"{doing}: not found (404), or the token cannot see it")
        if status >= 500:
            return ForgeError("outage", f"{doing}: GitHub is failing ({status}){said_part}")
        return ForgeError("rejected", f"{doing}: GitHub refused it ({status}){said_part}")


def _json(response: HttpResponse) -> Any:
    try:
        return response.json()
    except ValueError:
        raise ForgeError("outage", "GitHub answered with a body that is not JSON") from None


def _message(response: HttpResponse) -> str:
    try:
        data = response.json()
    except ValueError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    return message[:300] if isinstance(message, str) else ""


def _logins(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(
        item["login"] for item in items
        if isinstance(item, Mapping) and isinstance(item.get("login"), str)
    )  # fmt: skip


def _issue(item: Any) -> ForgeIssue | None:
    """One listed item as a ``ForgeIssue``; None for a pull request or a malformed item."""
    if not isinstance(item, Mapping) or "pull_request" in item:
        return None
    number, title = item.get("number"), item.get("title")
    if not isinstance(number, int) or isinstance(number, bool) or not isinstance(title, str):
        return None
    body = item.get("body")
    labels = item.get("labels")
    user = item.get("user")
    return ForgeIssue(
        number=number,
        title=title,
        body=body if isinstance(body, str) else "",
        labels=tuple(
            label["name"] if isinstance(label, Mapping) else label
            for label in (labels if isinstance(labels, list) else [])
            if isinstance(label, str)
            or (isinstance(label, Mapping) and isinstance(label.get("name"), str))
        ),
        state=str(item.get("state", "open")),
        url=str(item.get("html_url", "")),
        author=str(user.get("login", "")) if isinstance(user, Mapping) else "",
        assignees=_logins(item.get("assignees")),
    )
